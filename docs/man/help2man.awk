# help2man.awk — a man page from a program's --help text.
#
#   dlc --help | awk -f help2man.awk -v name=dlc -v section=1 \
#       -v version="dlc 0.1.0" -v summary="..." -v seealso="..." > dlc.1
#
# The help's layout is the convention of dlc's own: "usage: NAME ARGS" on
# the first line, paragraphs of text, headings that end in ':' at column 0,
# and items indented by two spaces, the term apart from its description by
# two spaces or more, continued on lines indented further.  "options..."
# and "commands" headings become sections (OPTIONS, COMMANDS), the others
# subsections; text after the items becomes a NOTES section.  -v lead adds
# a paragraph to the description, -v seealso a SEE ALSO section.  The
# number of online CPUs, which a default may show, is left out, so the
# page is the same wherever it is built.

function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}

function line(s) {
    s = esc(s)
    if (s ~ /^[.']/)
        s = "\\&" s
    print s
}

# A term: options in bold, placeholders (FILE, N, P1,P2,...) in italics.
function term(s,    n, w, i, out, eq) {
    n = split(s, w, " ")
    out = ""
    for (i = 1; i <= n; i++) {
        if (w[i] ~ /^-/) {
            eq = index(w[i], "=")
            if (eq)
                w[i] = "\\fB" esc(substr(w[i], 1, eq - 1)) "\\fR=\\fI" esc(substr(w[i], eq + 1)) "\\fR"
            else
                w[i] = "\\fB" esc(w[i]) "\\fR"
        } else if (w[i] ~ /^[A-Z]/) {
            w[i] = "\\fI" esc(w[i]) "\\fR"
        } else if (i == 1) {
            w[i] = "\\fB" esc(w[i]) "\\fR"
        } else {
            w[i] = esc(w[i])
        }
        out = out (i > 1 ? " " : "") w[i]
    }
    return out
}

BEGIN {
    NAME = toupper(name)
    printf ".TH %s %s \"\" \"%s\" \"User Commands\"\n", NAME, section, version
    print ".SH NAME"
    print esc(name) " \\- " esc(summary)
    state = "start"   # start, text (a paragraph), items (after a heading)
    items_seen = 0
}

{ gsub(/\([0-9]+: the online CPUs\)/, "(the online CPUs)") }

NR == 1 && /^usage: / {
    sub(/^usage: /, "")
    prog = $0
    sub(/ .*/, "", prog)
    sub(/^[^ ]+ ?/, "")
    print ".SH SYNOPSIS"
    print ".B " esc(prog)
    if ($0 != "")
        line($0)
    print ".SH DESCRIPTION"
    if (lead != "")
        line(lead)
    fresh = lead == ""   # no paragraph break before the section's first text
    next
}

/^$/ { para = 1; next }

/^[^ ].*:$/ {
    h = substr($0, 1, length($0) - 1)
    if (h ~ /^options/) {
        print ".SH OPTIONS"
        if (h != "options")
            print ".SS " esc(toupper(substr(h, 1, 1)) substr(h, 2))
    } else if (h == "commands") {
        print ".SH COMMANDS"
    } else {
        print ".SS " esc(toupper(substr(h, 1, 1)) substr(h, 2))
    }
    state = "items"
    para = 0
    column = 0
    next
}

/^  [^ ]/ && state == "items" {
    s = substr($0, 3)
    gap = match(s, /  +/)
    if (gap) {
        column = gap + RLENGTH   # where this list's descriptions start
    } else if (column && length(s) >= column && substr(s, column - 1, 1) == " ") {
        gap = column - 1         # a term as long as the column leaves one space
        RLENGTH = 1
    }
    print ".TP"
    if (gap) {
        print term(substr(s, 1, gap - 1))
        line(substr(s, gap + RLENGTH))
    } else {
        print term(s)
    }
    next
}

/^   / && state == "items" {
    s = $0
    sub(/^ +/, "", s)
    line(s)
    next
}

{
    if (state == "items") {
        print ".SH NOTES"
        state = "text"
        fresh = 1
    } else if (para && !fresh) {
        print ".PP"
    }
    para = 0
    fresh = 0
    line($0)
}

END {
    if (seealso != "") {
        print ".SH SEE ALSO"
        line(seealso)
    }
}
