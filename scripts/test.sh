#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds
# dlc with AddressSanitizer and UndefinedBehaviorSanitizer in build-test/,
# runs every test with CTest (lit + FileCheck regression tests, unit tests,
# a one-minute fuzz run), then checks that the code compiles warning-free
# under clang too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test

cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DDLC_SANITIZE=ON -DDLC_WERROR=ON \
      -DLIT_EXECUTABLE="$PWD/.venv/bin/lit" >/dev/null
cmake --build build-test -j"$(nproc)"
cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang-16 -DDLC_WERROR=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build build-clang -j"$(nproc)"
ctest --test-dir build-test --output-on-failure -j"$(nproc)"
