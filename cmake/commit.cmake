# commit.cmake — writes dlc_commit.h, the commit dlc is built from, at
# every build (cmake -DSOURCE=... -DOUTPUT=... -P commit.cmake), touching
# it only when the commit changed, so that only what includes it rebuilds.
# `dlc --version` and the programs dlc builds name it; outside a git
# checkout (a release tarball) it is "unknown".
find_package(Git QUIET)
set(commit unknown)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE} describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE failed ERROR_QUIET)
  if(NOT failed AND described)
    set(commit ${described})
  endif()
endif()
set(text "/* Written at build time by cmake/commit.cmake. */\n#define DLC_COMMIT \"${commit}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
