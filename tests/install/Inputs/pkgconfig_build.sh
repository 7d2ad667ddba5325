#!/bin/sh
# Builds the embedding example against an installed dlc through pkg-config
# alone (embed_pkgconfig.test):
#   pkgconfig_build.sh PKGCONFIG_DIR GEN EXAMPLE OUT "SANITIZE" CC [CFLAGS...]
# GEN holds lenet5.h and lenet5.c (dlc --emit=c); into OUT it writes
#   classify-shared    linked with libdlrt.so
#   classify-static    linked with libdlrt.a (-l:libdlrt.a, --as-needed)
#   classify-g++, classify-clang++   the example compiled as C++ by g++
#                      and clang++-16 against the generated header, linked
#                      with libdlrt.a by CC (which carries the sanitizers'
#                      run time, SANITIZE, that the build's libdlrt needs)
set -eu
export PKG_CONFIG_PATH="$1"
gen=$2 example=$3 out=$4 sanitize=$5
shift 5
cflags=$(pkg-config --cflags dlrt)
"$@" -I"$gen" $cflags "$example" "$gen/lenet5.c" $(pkg-config --libs dlrt) \
    -o "$out/classify-shared"
static="-Wl,--as-needed -l:libdlrt.a $(pkg-config --static --libs dlrt)"
"$@" -I"$gen" $cflags "$example" "$gen/lenet5.c" $static -o "$out/classify-static"
"$@" -I"$gen" $cflags -c "$gen/lenet5.c" -o "$out/lenet5.o"
g++ -std=c++17 -O1 -Wall -Wextra -Werror $sanitize -I"$gen" $cflags -x c++ -c "$example" \
    -o "$out/example-g++.o"
clang++-16 -std=c++17 -O1 -Wall -Wextra -Werror -I"$gen" $cflags -x c++ -c "$example" \
    -o "$out/example-clang++.o"
for cxx in g++ clang++; do
    "$@" "$out/example-$cxx.o" "$out/lenet5.o" $static -o "$out/classify-$cxx"
done
