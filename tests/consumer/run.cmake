# Installs the build tree into a scratch prefix, then builds and runs
# tests/consumer against it twice: through find_package and through
# pkg-config. Invoked by CTest with -DBUILD_DIR -DSOURCE_DIR -DWORK_DIR.
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)

# The consumer is configured with the generator that built attnpool: a
# machine may have Ninja and no make.
set(generator -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} ${generator} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/cmake
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake)
run(${WORK_DIR}/cmake/consumer)
run(${WORK_DIR}/cmake/c_consumer)
if(EXISTS ${WORK_DIR}/cmake/mpi_consumer)
  run(${MPIEXEC} -n 2 ${WORK_DIR}/cmake/mpi_consumer)
endif()

# The core without MPI (as on a machine that has none): configured and
# built, attnpool::mpi left out.
run(${CMAKE_COMMAND} ${generator} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/no-mpi
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/no-mpi)
if(EXISTS ${WORK_DIR}/no-mpi/mpi_consumer)
  message(FATAL_ERROR "attnpool::mpi built without MPI")
endif()

# A C-only project is told to enable C++.
execute_process(
  COMMAND ${CMAKE_COMMAND} ${generator} -S ${SOURCE_DIR}/tests/consumer/c_only
          -B ${WORK_DIR}/c-only -DCMAKE_PREFIX_PATH=${prefix}
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(result EQUAL 0 OR NOT output MATCHES "enable C\\+\\+")
  message(FATAL_ERROR "a C-only project (${result}):\n${output}")
endif()

# pkg-config, from C++ and from C (the C driver: the flags bring the C++
# runtime and libm); and the README's link line for C.
file(GLOB pc_dir ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
set(flags "$(PKG_CONFIG_PATH=${pc_dir} pkg-config --cflags --libs attnpool)")
run(sh -c "c++ -std=c++17 -Wall -Wextra -Werror -pedantic \
  ${SOURCE_DIR}/tests/consumer/main.cc ${flags} -o ${WORK_DIR}/pkgconfig-consumer")
run(${WORK_DIR}/pkgconfig-consumer)
run(sh -c "cc -std=c99 -Wall -Wextra -Werror -pedantic \
  ${SOURCE_DIR}/tests/consumer/c_main.c ${flags} -o ${WORK_DIR}/pkgconfig-c-consumer")
run(${WORK_DIR}/pkgconfig-c-consumer)
file(GLOB lib_dir ${prefix}/lib*/libattnpool.a ${prefix}/lib/*/libattnpool.a)
get_filename_component(lib_dir "${lib_dir}" DIRECTORY)
run(cc -std=c99 -I${prefix}/include ${SOURCE_DIR}/tests/consumer/c_main.c
    -L${lib_dir} -lattnpool -lhwy -fopenmp -lstdc++ -lm
    -o ${WORK_DIR}/readme-c-consumer)
run(${WORK_DIR}/readme-c-consumer)
