# dlcGenerate.cmake — dlc_generate(), part of dlc's CMake package.
#
#   dlc_generate(<target> <file.dl>
#                [NETWORKS <name>...]      the networks the file defines
#                                          (default: the file's name,
#                                          lenet5 for lenet5.dl)
#                [OPTIONS <dlc option>...] e.g. --dtype=f64, -fno-fuse
#                [OUTPUT_DIR <dir>]        default: dlc/<target> in the
#                                          current binary folder
#                [DEPENDS <file>...])      files the .dl imports
#
# At build time, runs `dlc <file.dl> --emit=c -o <dir>`, which writes
# NAME.h and NAME.c for each network (and NAME_cuda.c with
# --target=cpu,cuda), adds the .c files to <target>'s sources and <dir> to
# its include folders.  The target links the runtime itself:
# target_link_libraries(<target> PRIVATE dlc::dlrt) (or dlc::dlrt_static).
function(dlc_generate target source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "OUTPUT_DIR" "NETWORKS;OPTIONS;DEPENDS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dlc_generate: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  get_filename_component(source "${source}" ABSOLUTE)
  if(NOT arg_NETWORKS)
    get_filename_component(arg_NETWORKS "${source}" NAME_WE)
  endif()
  if(NOT arg_OUTPUT_DIR)
    set(arg_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/dlc/${target}")
  endif()
  set(outputs "")
  foreach(net IN LISTS arg_NETWORKS)
    list(APPEND outputs "${arg_OUTPUT_DIR}/${net}.h" "${arg_OUTPUT_DIR}/${net}.c")
    if("--target=cpu,cuda" IN_LIST arg_OPTIONS)
      list(APPEND outputs "${arg_OUTPUT_DIR}/${net}_cuda.c")
    endif()
  endforeach()
  add_custom_command(OUTPUT ${outputs}
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${arg_OUTPUT_DIR}"
    COMMAND dlc::dlc "${source}" --emit=c -o "${arg_OUTPUT_DIR}" ${arg_OPTIONS}
    DEPENDS "${source}" dlc::dlc ${arg_DEPENDS}
    COMMENT "Compiling ${source} with dlc"
    VERBATIM)
  target_sources(${target} PRIVATE ${outputs})
  target_include_directories(${target} PRIVATE "${arg_OUTPUT_DIR}")
endfunction()
