// attnpool._core: the library's functions on NumPy arrays. The Python
// package (python/attnpool/) gives them their keywords, defaults and the
// allocation of results; here (stages.cc, pool.cc, layers.cc,
// regression.cc) each call is checked, dispatched on its dtype (float32 or
// float64, the first array's) and run with the GIL released.
// attnpool::Error becomes ValueError with the library's message, which
// names the argument.
#include <attnpool/attnpool.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "python/src/arguments.h"
#include "python/src/plain.h"

namespace attnpool_python {
namespace {

// The names of a table's entries (kKernels, kDistances, kNormalizations).
template <class Entry, size_t Count>
std::vector<std::string> NamesOf(const Entry (&table)[Count]) {
  std::vector<std::string> names;
  for (const Entry& entry : table) names.push_back(entry.name);
  return names;
}

// The mask fields (mask_fields.h), each (name, heads_name, kind, needs,
// help): the package's mask keywords are generated from them.
std::vector<
    std::tuple<std::string, std::string, std::string, std::string, std::string>>
MaskFields() {
  static const char* const needs[] = {"any", "scores", "softmax"};
  std::vector<std::tuple<std::string, std::string, std::string, std::string,
                         std::string>>
      fields;
#define ATTNPOOL_PYTHON_FIELD(name, heads_name, kind, needs_, check, help) \
  fields.emplace_back(#name, #heads_name, #kind,                           \
                      needs[int(attnpool::MaskNeeds::needs_)], help);
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_PYTHON_FIELD)
#undef ATTNPOOL_PYTHON_FIELD
  return fields;
}

}  // namespace
}  // namespace attnpool_python

NB_MODULE(_core, m) {
  using namespace attnpool_python;
  m.doc() = "attnpool's compiled core; use the functions of `attnpool`.";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const attnpool::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const attnpool::Cancelled& e) {
      // Cancelled by a signal handler that raised (PollSignals), its
      // exception (KeyboardInterrupt for Ctrl-C) still set.
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });
  main_thread_ident = nb::cast<unsigned long>(
      nb::module_::import_("threading").attr("main_thread")().attr("ident"));
  m.attr("__version__") = attnpool::version();
  DefineStages(m);
  DefinePool(m);
  DefineLayers(m);
  DefineRegression(m);
  DefineElements(m);
  m.def("compiled_targets", &attnpool::compiled_targets);
  m.def("supported_targets", &attnpool::supported_targets);
  m.def("active_target", &attnpool::active_target);
  m.def("force_target", &attnpool::force_target);
  m.def("reset_target", &attnpool::reset_target);
  m.def("last_run_target", &attnpool::last_run_target);
  m.def("bf16_dot_instruction", &attnpool::bf16_dot_instruction);
  m.def("supported_bf16_dot_instructions",
        &attnpool::supported_bf16_dot_instructions);
  m.def("force_bf16_dot_instruction", &attnpool::force_bf16_dot_instruction);
  m.def("tuning", &attnpool::tuning);
  m.def("tuning_parameters", &attnpool::tuning_parameters);
  m.def("tunings", &attnpool::tunings);
  m.def("force_tuning", &attnpool::force_tuning);
  m.def("last_fused_path", &attnpool::last_fused_path);
  m.def("input_copies", [] { return g_input_copies.load(); });
  m.def("plain_calls", [] { return g_plain_calls.load(); });
  m.def("kernel_names", [] { return NamesOf(attnpool::kKernels); });
  m.def("distance_names", [] { return NamesOf(attnpool::kDistances); });
  m.def("normalization_names",
        [] { return NamesOf(attnpool::kNormalizations); });
  m.def("mask_fields", &MaskFields);
}
