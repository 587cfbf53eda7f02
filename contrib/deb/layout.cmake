# Run by cpack (CPACK_PRE_BUILD_SCRIPTS) on the staged install, before the .deb
# is made: moves what `cmake --install` puts in general places to where a Debian
# package keeps it, and adds what Debian policy asks of every package.
#   - systemd units: /lib/systemd/system (where Debian 12's systemd.pc and
#     debhelper put a package's units; /usr/lib/... is for the local admin's
#     `cmake --install --prefix /usr`)
#   - zsh completion: /usr/share/zsh/vendor-completions (Debian's zsh reads that
#     one, not /usr/share/zsh/site-functions)
#   - man pages compressed (gzip -9n: no name or time stamp, so the same input
#     gives the same package)
#   - /usr/share/doc/tollgate: copyright, and the example configuration the
#     systemd unit's documentation copies to /etc/tollgate
set(root "${CPACK_TEMPORARY_DIRECTORY}")
set(src "${CPACK_TOLLGATE_SOURCE_DIR}")

# Moves every file matching GLOB (under root) into DIR (under root) and removes
# the directories it leaves empty.
function(move_to dir glob)
  file(GLOB_RECURSE found "${root}/${glob}")
  foreach(f ${found})
    get_filename_component(name "${f}" NAME)
    get_filename_component(from "${f}" DIRECTORY)
    if(from STREQUAL "${root}/${dir}")
      continue()
    endif()
    file(MAKE_DIRECTORY "${root}/${dir}")
    file(RENAME "${f}" "${root}/${dir}/${name}")
    while(NOT from STREQUAL root)
      file(GLOB left "${from}/*")
      if(left)
        break()
      endif()
      file(REMOVE_RECURSE "${from}")
      get_filename_component(from "${from}" DIRECTORY)
    endwhile()
  endforeach()
endfunction()

move_to(lib/systemd/system "usr/lib/systemd/system/tollgate-proxy.*")
move_to(usr/share/zsh/vendor-completions "usr/share/zsh/*/_tollgate")

file(GLOB pages "${root}/usr/share/man/man1/*.1")
foreach(page ${pages})
  execute_process(COMMAND gzip -9nf "${page}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${page}: ${rc}")
  endif()
endforeach()

set(doc "${root}/usr/share/doc/tollgate")
file(MAKE_DIRECTORY "${doc}/examples")
configure_file("${src}/contrib/deb/copyright" "${doc}/copyright" COPYONLY)
foreach(example proxy.json policy.json logrotate.conf)
  configure_file("${src}/examples/${example}" "${doc}/examples/${example}" COPYONLY)
endforeach()
