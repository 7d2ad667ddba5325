# install.cmake — what `cmake --install build [--prefix P]` puts where, the
# files through which other builds find it, the man pages and the .deb.
#
#   bin/dlc                          finds the runtime below through paths
#                                    relative to itself (driver/dlc.c)
#   LIBDIR/libdlrt.so.0.1.0, .so.0.1, .so    the runtime, shared
#   LIBDIR/libdlrt.a, libdlrt_program.a      static; dlc links these into
#                                    programs
#   include/dlc/dlrt.h, dlrt_kernels.h       what generated code includes
#   LIBDIR/pkgconfig/dlrt.pc         pkg-config --cflags --libs dlrt
#   LIBDIR/cmake/dlc/                find_package(dlc): dlc::dlc, dlc::dlrt,
#                                    dlc::dlrt_static, dlc::dlrt_program and
#                                    dlc_generate() (dlcGenerate.cmake)
#   share/man/man1/dlc.1, dlc-program.1      written from --help at build time
#   share/dlc/models/, share/dlc/examples/   the model zoo, the embedding example
#   share/doc/dlc/                   README.md and docs/
#
# A package is made with `cpack -G DEB` from a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr (Debian's multiarch LIBDIR) and, to run on
# other CPUs than the building one, -DDLC_NATIVE=OFF.
include(CMakePackageConfigHelpers)

install(TARGETS dlc dlrt dlrt_shared dlrt_program EXPORT dlcTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES runtime/dlrt.h runtime/dlrt_kernels.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dlc)

# ---- pkg-config: relocatable (the prefix is found from the .pc file's
# ---- folder), static dependencies private ------------------------------
file(RELATIVE_PATH DLRT_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" DLRT_PC_PREFIX "${DLRT_PC_PREFIX}")
set(DLRT_PC_LIBS_PRIVATE "-lopenblas -lpng -ljpeg -lm -lpthread")
if(CMAKE_DL_LIBS)
  string(APPEND DLRT_PC_LIBS_PRIVATE " -l${CMAKE_DL_LIBS}")
endif()
if(OpenMP_C_FOUND)
  string(APPEND DLRT_PC_LIBS_PRIVATE " ${OpenMP_C_FLAGS}")
endif()
configure_file(cmake/dlrt.pc.in ${CMAKE_BINARY_DIR}/dlrt.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/dlrt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- the CMake package ----------------------------------------------------
set(DLC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlc)
set(DLC_DATADIR ${CMAKE_INSTALL_DATADIR}/dlc)
install(EXPORT dlcTargets NAMESPACE dlc:: DESTINATION ${DLC_CMAKE_DIR})
configure_package_config_file(cmake/dlcConfig.cmake.in ${CMAKE_BINARY_DIR}/dlcConfig.cmake
  INSTALL_DESTINATION ${DLC_CMAKE_DIR} PATH_VARS DLC_DATADIR)
# 0.x: a new minor version may change the API
write_basic_package_version_file(${CMAKE_BINARY_DIR}/dlcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/dlcConfig.cmake ${CMAKE_BINARY_DIR}/dlcConfigVersion.cmake
              cmake/dlcGenerate.cmake
        DESTINATION ${DLC_CMAKE_DIR})

# ---- man pages: written from the --help of dlc and of a generated program
# ---- (docs/man/program_help.c) by docs/man/help2man.awk, so they cannot
# ---- say other than --help does ------------------------------------------
add_executable(dlc_program_help docs/man/program_help.c)
target_link_libraries(dlc_program_help PRIVATE dlrt_program)
set(DLC_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(help2man ${CMAKE_SOURCE_DIR}/docs/man/help2man.awk)
add_custom_command(OUTPUT ${DLC_MAN_DIR}/dlc.1
  COMMAND ${CMAKE_COMMAND} -E make_directory ${DLC_MAN_DIR}
  COMMAND sh -c "\"$1\" --help | awk -f \"$2\" -v name=dlc -v section=1 -v version=\"dlc $3\" \
      -v summary='compile a neural network into C and into a program that trains it' \
      -v seealso='dlc-program(1); the documentation in /usr/share/doc/dlc/' > \"$4\""
    sh $<TARGET_FILE:dlc> ${help2man} ${PROJECT_VERSION} ${DLC_MAN_DIR}/dlc.1
  DEPENDS dlc ${help2man}
  COMMENT "Writing the man page dlc(1) from dlc --help" VERBATIM)
add_custom_command(OUTPUT ${DLC_MAN_DIR}/dlc-program.1
  COMMAND ${CMAKE_COMMAND} -E make_directory ${DLC_MAN_DIR}
  COMMAND sh -c "\"$1\" --help | awk -f \"$2\" -v name=dlc-program -v section=1 \
      -v version=\"dlc $3\" -v summary='the commands of a program that dlc built' \
      -v lead='A program built by dlc NET.dl -o NET trains, evaluates and runs the network NET. \
The defaults shown in parentheses are those of models/lenet5.dl; each program takes its own \
from the train section of its network, and NET --help shows them.' \
      -v seealso='dlc(1); program.md in /usr/share/doc/dlc/' > \"$4\""
    sh $<TARGET_FILE:dlc_program_help> ${help2man} ${PROJECT_VERSION} ${DLC_MAN_DIR}/dlc-program.1
  DEPENDS dlc_program_help ${help2man}
  COMMENT "Writing the man page dlc-program(1) from a generated program's --help" VERBATIM)
add_custom_target(dlc_man ALL DEPENDS ${DLC_MAN_DIR}/dlc.1 ${DLC_MAN_DIR}/dlc-program.1)
install(FILES ${DLC_MAN_DIR}/dlc.1 ${DLC_MAN_DIR}/dlc-program.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# ---- the model zoo, the example, the docs ---------------------------------
install(DIRECTORY models/ DESTINATION ${DLC_DATADIR}/models FILES_MATCHING PATTERN "*.dl")
install(FILES examples/embed_lenet5.c examples/CMakeLists.txt
        DESTINATION ${DLC_DATADIR}/examples)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")

# ---- the .deb: cpack -G DEB ----------------------------------------------
# Depends: what dlc needs to build a program (a C compiler, libdlrt's
# libraries' development files) and to run (LLVM's library): the packages
# of README.md's table
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dlc)
set(CPACK_PACKAGE_VENDOR "dlc")
set(CPACK_PACKAGE_CONTACT "dlc developers <dlc@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "deep-learning model compiler: .dl networks to C and PTX")
set(CPACK_PACKAGE_DESCRIPTION "dlc compiles a neural network written in a small language into \
specialized C for the CPU and PTX for NVIDIA GPUs, linked with a small runtime (libdlrt) \
that trains and runs it.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "build-essential, libopenblas-dev, zlib1g-dev, libpng-dev, libjpeg62-turbo-dev, libgomp1, libllvm16")
# a build with MPI links the programs it builds with Open MPI (data-parallel
# training, runtime/program/distributed.c)
if(MPI_C_FOUND)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libopenmpi-dev")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "pkg-config, cmake")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# a shlibs file for packages built against libdlrt.so, and the ldconfig trigger
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
include(CPack)
