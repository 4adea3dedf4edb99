# hwtune-run: the stand-alone C runner (issue #3). Its sources sit one level
# below engine/standalone/ on purpose: engine.cmake globs engine/*/*.c into
# libhwtune.so, and this program's main() must not land in the library.
# SQLite is dlopen'ed at run time (src/sqlite_dyn.c), so the build needs
# neither SQLite headers nor a library to link.
add_executable(hwtune-run
  ${CMAKE_CURRENT_LIST_DIR}/src/hwtune_run.c
  ${CMAKE_CURRENT_LIST_DIR}/src/json.c
  ${CMAKE_CURRENT_LIST_DIR}/src/records_file.c
  ${CMAKE_CURRENT_LIST_DIR}/src/runner_checks.c
  ${CMAKE_CURRENT_LIST_DIR}/src/sqlite_dyn.c
  ${CMAKE_CURRENT_LIST_DIR}/src/weights.c)
target_compile_options(hwtune-run PRIVATE ${HWTUNE_WARN})
# The databases the runner accepts are the ones hwtune accepts: the
# application id and the newest schema version come from the one list of
# migrations (src/hwtune/db/migrations.py), read here, so a new migration
# moves both readers at once.
set(HWTUNE_MIGRATIONS ${CMAKE_SOURCE_DIR}/src/hwtune/db/migrations.py)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${HWTUNE_MIGRATIONS})
file(STRINGS ${HWTUNE_MIGRATIONS} _hwtune_versions REGEX "^    \\(([0-9]+), \"")
file(STRINGS ${HWTUNE_MIGRATIONS} _hwtune_app_id REGEX "^APPLICATION_ID = 0x[0-9A-Fa-f]+")
set(HWTUNE_SCHEMA_LATEST 0)
foreach(line ${_hwtune_versions})
  string(REGEX MATCH "[0-9]+" v "${line}")
  if(v GREATER HWTUNE_SCHEMA_LATEST)
    set(HWTUNE_SCHEMA_LATEST ${v})
  endif()
endforeach()
string(REGEX MATCH "0x[0-9A-Fa-f]+" HWTUNE_APPLICATION_ID "${_hwtune_app_id}")
if(HWTUNE_SCHEMA_LATEST EQUAL 0 OR NOT HWTUNE_APPLICATION_ID)
  message(FATAL_ERROR "cannot read the schema version / APPLICATION_ID from ${HWTUNE_MIGRATIONS}")
endif()
target_compile_definitions(hwtune-run PRIVATE HWTUNE_SCHEMA_LATEST=${HWTUNE_SCHEMA_LATEST}
                           HWTUNE_APPLICATION_ID=${HWTUNE_APPLICATION_ID})
target_link_libraries(hwtune-run PRIVATE hwtune ${CMAKE_DL_LIBS} m)
# Installed next to libhwtune.so, so $ORIGIN finds the library wherever the
# wheel is unpacked.
set_target_properties(hwtune-run PROPERTIES INSTALL_RPATH "$ORIGIN")
if(SKBUILD)
  install(TARGETS hwtune-run RUNTIME DESTINATION hwtune/_lib)
endif()
