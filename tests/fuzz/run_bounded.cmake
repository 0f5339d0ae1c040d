# Runs the importer fuzzer for 30 s on a fresh seed corpus (cmake -P; see CMakeLists.txt).
# Inputs: FUZZER, TESTDATA, SEEDS (comma-separated case folders under TESTDATA), WORK_DIR.
if(NOT EXISTS "${FUZZER}")
  message(FATAL_ERROR "${FUZZER} does not exist: build the fuzz_importer target first")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/corpus" "${WORK_DIR}/artifacts")
string(REPLACE "," ";" _seeds "${SEEDS}")
foreach(_seed IN LISTS _seeds)
  set(_model "${TESTDATA}/${_seed}/model.onnx")
  if(NOT EXISTS "${_model}")
    message(FATAL_ERROR "seed model ${_model} does not exist (is libonnx-testdata installed?)")
  endif()
  string(REPLACE "/" "_" _name "${_seed}")
  file(COPY_FILE "${_model}" "${WORK_DIR}/corpus/${_name}.onnx")
endforeach()

execute_process(
  COMMAND "${FUZZER}" -max_total_time=30 -rss_limit_mb=2048 -timeout=10
          "-artifact_prefix=${WORK_DIR}/artifacts/" -print_final_stats=1 "${WORK_DIR}/corpus"
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "fuzz_importer failed (exit ${_rc}); the input is in ${WORK_DIR}/artifacts")
endif()
