# Builds and runs tests/consumer/subproject with attnpool from this checkout
# through FetchContent and through add_subdirectory, and configures the
# latter once more without a build type (which attnpool must leave empty).
# Invoked by CTest with -DSOURCE_DIR -DWORK_DIR -DGENERATOR -DMAKE_PROGRAM
# -DC_COMPILER -DCXX_COMPILER [-DLAUNCHER]: with ccache as the launcher,
# the library's objects are those of attnpool's own build where it used
# ccache too (the same commands), not compiled again.
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

set(generator -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(LAUNCHER)
  list(APPEND generator -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}
       -DCMAKE_C_COMPILER_LAUNCHER=${LAUNCHER})
endif()
file(REMOVE_RECURSE ${WORK_DIR})
set(project ${SOURCE_DIR}/tests/consumer/subproject)
run(${CMAKE_COMMAND} ${generator} -S ${project} -B ${WORK_DIR}/no-build-type
    -DATTNPOOL_HOW=subdirectory -DATTNPOOL_SOURCE=${SOURCE_DIR})
foreach(how fetchcontent subdirectory)
  run(${CMAKE_COMMAND} ${generator} -S ${project} -B ${WORK_DIR}/${how}
      -DCMAKE_BUILD_TYPE=Release -DATTNPOOL_HOW=${how}
      -DATTNPOOL_SOURCE=${SOURCE_DIR})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/${how})
  run(${WORK_DIR}/${how}/consumer)
  run(${WORK_DIR}/${how}/c_consumer)
endforeach()
