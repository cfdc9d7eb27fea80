# What `cmake --install` puts where (issue 14), relative to CMAKE_INSTALL_PREFIX
# and under DESTDIR:
#   bin/httphsm                                       the program
#   /sbin/mount.httphsm -> bin/httphsm                mount(8)'s helper for type httphsm
#   share/man/man1/httphsm.1, man8/mount.httphsm.8    from docs/man/*.scd (when scdoc is found)
#   share/bash-completion/completions/httphsm
#   /lib/systemd/system/httphsm@.service              one mount per instance
# mount(8) looks for helpers in /sbin only, and systemd for units in /lib/systemd/system
# (Debian 12), so for the /usr prefix those two go there; under any other prefix they go
# below it (PREFIX/sbin, PREFIX/lib/systemd/system), where nothing finds them unless told.
# HTTPHSM_MOUNT_HELPER_DIR and HTTPHSM_SYSTEMD_UNIT_DIR override both.

include(GNUInstallDirs)

if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_helper_dir "/sbin")
  set(_unit_dir "/lib/systemd/system")
else()
  set(_helper_dir "${CMAKE_INSTALL_FULL_SBINDIR}")
  set(_unit_dir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
set(HTTPHSM_MOUNT_HELPER_DIR "${_helper_dir}" CACHE PATH "Where mount.httphsm goes (absolute)")
set(HTTPHSM_SYSTEMD_UNIT_DIR "${_unit_dir}" CACHE PATH "Where httphsm@.service goes (absolute)")

install(TARGETS httphsm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The helper is the program itself under another name: it dispatches on argv[0].  The
# link is absolute, as it crosses from /sbin into /usr.
install(CODE "
  set(_dir \"\$ENV{DESTDIR}${HTTPHSM_MOUNT_HELPER_DIR}\")
  file(MAKE_DIRECTORY \"\${_dir}\")
  message(STATUS \"Installing: \${_dir}/mount.httphsm -> ${CMAKE_INSTALL_FULL_BINDIR}/httphsm\")
  file(CREATE_LINK \"${CMAKE_INSTALL_FULL_BINDIR}/httphsm\" \"\${_dir}/mount.httphsm\" SYMBOLIC)
")

install(FILES completion/httphsm.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME httphsm)

configure_file(systemd/httphsm@.service.in ${CMAKE_CURRENT_BINARY_DIR}/httphsm@.service @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/httphsm@.service DESTINATION ${HTTPHSM_SYSTEMD_UNIT_DIR})

# Man pages: scdoc turns docs/man/NAME.SECTION.scd into roff.  Without scdoc the build
# goes on without them (the Debian package build-depends on scdoc).
find_program(SCDOC scdoc)
if(SCDOC)
  set(_pages)
  foreach(_page httphsm.1 mount.httphsm.8)
    string(REGEX REPLACE ".*\\.([0-9])$" "\\1" _section ${_page})
    set(_src ${CMAKE_CURRENT_SOURCE_DIR}/docs/man/${_page}.scd)
    set(_out ${CMAKE_CURRENT_BINARY_DIR}/man/${_page})
    add_custom_command(OUTPUT ${_out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/man
      COMMAND sh -c "\"$0\" < \"$1\" > \"$2\"" ${SCDOC} ${_src} ${_out}
      DEPENDS ${_src}
      COMMENT "Generating man page ${_page}"
      VERBATIM)
    list(APPEND _pages ${_out})
    install(FILES ${_out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section})
  endforeach()
  add_custom_target(man ALL DEPENDS ${_pages})
else()
  message(STATUS "scdoc not found: man pages are neither built nor installed")
endif()
