# SPDX-License-Identifier: MIT
# LICENSE is the MIT license text (its title and its grant and warranty sentences).
file(READ ${FILE} text)
foreach(needle "MIT License" "Permission is hereby granted, free of charge"
        "The above copyright notice and this permission notice shall be included"
        "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND")
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "LICENSE lacks: ${needle}")
  endif()
endforeach()
