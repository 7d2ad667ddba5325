# lit configuration for dlc's regression tests.
#
# Every .dl, .dlir and .test file under tests/ is a test: its RUN: lines are
# shell commands with these substitutions, and FileCheck checks its CHECK:
# lines.  See docs/testing.md.
#   %dlc        the dlc compiler of this build
#   %models     the model zoo (models/)
#   %tests      this folder
#   %bin        the folder of this build's test programs (test_data, ...)
#   %cc         the build's C compiler, warnings as errors, sanitizers as built
#   %cc_bare    the same without -I runtime/ (for an installed dlc)
#   %build      the build folder; %cmake, %cpack: the build's CMake tools
#   %prefix, %libdir  the install prefix and library folder it configured
#   %sanitize   the sanitizer flags of the build (empty without)
#   %dlrt       libdlrt and the libraries it needs, to link generated code
#               (what a product that embeds a network links)
#   %dlrt_program  libdlrt_program (dlrt_main, the program's command line)
#               before %dlrt, to link a program's own main
#   %python     the Python that runs lit (for helper scripts)
#   %exit N     runs the rest of the line and requires exit status N
#   FileCheck, not   LLVM's tools from llvm-16-tools
import os
import sys

import lit.formats

config.name = "dlc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".dl", ".dlir", ".test"]
config.excludes = ["fuzz", "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)

# lit --param dlc_flags=... adds options to every dlc command: the
# lit-unoptimized CTest runs the numeric tests with -fno-plan-memory -fno-fuse -fno-tile, so
# that the optimizations are checked not to change results
dlc_flags = lit_config.params.get("dlc_flags", "")
config.substitutions.append(("%dlc", (config.dlc + " " + dlc_flags).strip()))
if dlc_flags:
    # its own output folders: CTest runs lit and lit-unoptimized side by
    # side, and the same test in both would build into the same %t
    config.test_exec_root = os.path.join(config.test_exec_root, "flags",
                                         "".join(c if c.isalnum() else "_" for c in dlc_flags))
config.substitutions.append(("%bin", config.bin))
# compiling generated code: the build's compiler (with its sanitizers) and
# libdlrt (and libdlrt_program) with what they link
sanitize = ""
if config.sanitize.upper() in ("ON", "1", "TRUE", "YES"):
    sanitize = "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cflags = "-std=c11 -O1 -g -Wall -Wextra -Werror " + sanitize
# %cc_bare: without the source tree's runtime/, for building against an
# installed dlc (tests/install/); first, before %cc replaces its start
config.substitutions.append(("%cc_bare", (config.cc + " " + cflags).strip()))
config.substitutions.append(("%cc", config.cc + " " + cflags + " -I" +
                             os.path.join(config.source_root, "runtime")))
# installing: the build folder, the cmake and cpack that configured it, the
# install layout, and the sanitizer flags a product must build with to link
# this build's libdlrt
config.substitutions.append(("%build", config.build_root))
config.substitutions.append(("%cmake", config.cmake))
config.substitutions.append(("%cpack", config.cpack))
config.substitutions.append(("%libdir", config.libdir))
config.substitutions.append(("%prefix", config.prefix))
config.substitutions.append(("%sanitize", sanitize))
# %dlrt_program before %dlrt, which would otherwise replace its start
config.substitutions.append(("%dlrt_program", config.dlrt_program_link))
config.substitutions.append(("%dlrt", config.dlrt_link))
config.substitutions.append(("%models", os.path.join(config.source_root, "models")))
config.substitutions.append(("%tests", config.test_source_root))
config.substitutions.append(("%exit", sys.executable + " " + os.path.join(config.test_source_root, "exit_code.py")))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("FileCheck", config.filecheck))
# `not` as a command: at the start of the line or after | && ; (not in text)
config.substitutions.append((r"(?:^|(?<=\| )|(?<=&& )|(?<=; ))not(?= )", config.not_tool))

if config.dot and os.path.exists(config.dot):
    config.available_features.add("dot")
    config.substitutions.append(("%dot", config.dot))

# the numeric oracle and the real data, where installed (scripts/deps.sh
# test installs them; a test needing them says REQUIRES: torch / torchvision /
# fashion-mnist / fortunes)
import subprocess
if subprocess.run([sys.executable, "-c", "import torch, numpy"],
                  capture_output=True).returncode == 0:
    config.available_features.add("torch")
# torchvision's models, the reference of the model zoo (tests/models/zoo_torchvision_*)
if subprocess.run([sys.executable, "-c", "import torchvision"],
                  capture_output=True).returncode == 0:
    config.available_features.add("torchvision")
if os.path.isdir("/usr/share/datasets/fashion-mnist"):
    config.available_features.add("fashion-mnist")
# Debian's fortunes: English text for the character-level language models
if os.path.isdir("/usr/share/games/fortunes"):
    config.available_features.add("fortunes")
# a CPU with AVX2, for which OpenBLAS has better kernels than its generic ones
if any(l.startswith("flags") and " avx2" in l for l in open("/proc/cpuinfo")):
    config.available_features.add("avx2")

# sanitizer builds: report leaks and errors as failures
config.environment["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
config.environment["NO_COLOR"] = "1"
# Tests run side by side on few cores: OpenMP threads that spin while
# waiting (the default, fastest on an idle machine) would steal the cores
# their partners need, and a 2-thread program slows down tenfold.
config.environment["OMP_WAIT_POLICY"] = "passive"

# data-parallel training (docs/distributed.md): the build's MPI and
# mpirun (CMake fails the suite where they are missing, tests/CMakeLists.txt).
# As root (CI), mpirun wants to be told it may be; --oversubscribe lets 3
# ranks share 2 cores.  %mpirun runs a job with a deadline of its own, so
# that a test never hangs.  Open MPI's libraries keep memory to the end,
# which LeakSanitizer would report in every rank: leaks are not checked
# under mpirun (the program's own code is checked in the one-process runs).
if config.mpi.upper() in ("TRUE", "ON", "1", "YES") and config.mpirun and \
        os.path.exists(config.mpirun):
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", "env ASAN_OPTIONS=detect_leaks=0 timeout 300 " +
                                 config.mpirun + " --oversubscribe --mca btl self,vader,tcp"))
    config.substitutions.append(("%mpiexec", config.mpirun))
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    # no ranks of other jobs, and no warnings about the sandbox's network
    config.environment["OMPI_MCA_btl_base_warn_component_unused"] = "0"
if os.geteuid() == 0:
    config.available_features.add("root")

# the GPU target: ptxas (from a CUDA toolkit, optional) assembles the PTX
# dlc emits; an NVIDIA driver with a GPU runs it.  Tests that need them say
# REQUIRES: ptxas / gpu, and lit reports them UNSUPPORTED elsewhere.
import shutil
ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas"
                                  if os.access("/usr/local/cuda/bin/ptxas", os.X_OK) else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"],
                                                 capture_output=True).returncode == 0:
    config.available_features.add("gpu")
for var in ("LD_LIBRARY_PATH", "DLRT_CUDA_DEVICE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
