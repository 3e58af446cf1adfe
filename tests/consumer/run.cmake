# Installs the build tree into a scratch prefix, then builds and runs
# tests/consumer against it twice: through find_package and through
# pkg-config. Invoked by CTest with -DBUILD_DIR -DSOURCE_DIR -DWORK_DIR.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/cmake
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake)
run(${WORK_DIR}/cmake/consumer)
if(EXISTS ${WORK_DIR}/cmake/mpi_consumer)
  run(${MPIEXEC} -n 2 ${WORK_DIR}/cmake/mpi_consumer)
endif()

file(GLOB pc_dir ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
run(sh -c "PKG_CONFIG_PATH=${pc_dir} c++ -std=c++17 ${SOURCE_DIR}/tests/consumer/main.cc \
  $(PKG_CONFIG_PATH=${pc_dir} pkg-config --cflags --libs attnpool) -o ${WORK_DIR}/pkgconfig-consumer")
run(${WORK_DIR}/pkgconfig-consumer)
