# SPDX-License-Identifier: MIT
# hvkit_include_tree(<out-var> <source-include-dir> <dir>)
# Makes <dir>/hvkit name <source-include-dir> (a symbolic link; a copy, refreshed at every
# configure, where links cannot be made) and sets <out-var> to <dir>: the directory to put
# on the include path for #include <hvkit/...>.
function(hvkit_include_tree out src dir)
  file(MAKE_DIRECTORY ${dir})
  set(target "")
  if(IS_SYMLINK ${dir}/hvkit)
    file(READ_SYMLINK ${dir}/hvkit target)
  endif()
  if(NOT target STREQUAL src)
    file(REMOVE_RECURSE ${dir}/hvkit)
    file(CREATE_LINK ${src} ${dir}/hvkit RESULT rc SYMBOLIC)
    if(NOT rc EQUAL 0)
      file(COPY ${src}/ DESTINATION ${dir}/hvkit)
    endif()
  endif()
  set(${out} ${dir} PARENT_SCOPE)
endfunction()
