// runtime_module.cpp — gptc._runtime: Python bindings of gptc::rt::Model and of the
// generation loop (gptc::rt::Generator) over two of them.
//
//   m = gptc._runtime.Model("out/tiny")       # RuntimeError with the runtime's message
//   m.inputs   -> [("idx", "i64", (2, 32))]   # also .results, .params
//   logits, loss = m.run([idx])                # numpy in, numpy out (fresh arrays)
//   w = m.param("lm_head.weight"); m.set_param("lm_head.weight", w * 0.5)
//   m.save_weights("out/tiny/weights.safetensors")
//
// dtypes: f32 <-> float32, f64 <-> float64, i64 <-> int64, i1 <-> bool, bf16 <-> uint16
// (the raw bits; an ml_dtypes bfloat16 array is accepted too). Arrays go through the buffer
// protocol and numpy's Python API only (no numpy C API), so any numpy version works with
// this pybind11.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gptc/generate.hpp"
#include "gptc/model.hpp"
#include "gptc/runtime.h"
#include "gptc/sample.hpp"

namespace py = pybind11;
using gptc::rt::Model;
using gptc::rt::TensorSpec;

namespace {

const char* numpy_dtype(const std::string& dtype) {
  if (dtype == "f32") return "float32";
  if (dtype == "f64") return "float64";
  if (dtype == "i64") return "int64";
  if (dtype == "i1") return "bool";
  if (dtype == "bf16") return "uint16";
  throw gptc::rt::Error("unknown dtype '" + dtype + "'");
}

py::tuple shape_tuple(const std::vector<int64_t>& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
  return t;
}

py::list spec_list(const std::vector<TensorSpec>& specs) {
  py::list out;
  for (const TensorSpec& s : specs) out.append(py::make_tuple(s.name, s.dtype, shape_tuple(s.shape)));
  return out;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Checks `obj` is a numpy array of spec's dtype and shape and returns a C-contiguous one
// (obj itself when it already is). `what` is e.g. "input 'idx'".
py::object checked_array(const py::object& obj, const TensorSpec& spec, const std::string& what) {
  py::module_ np = py::module_::import("numpy");
  if (!py::isinstance(obj, np.attr("ndarray")))
    throw py::value_error(what + ": expected a numpy array, got " +
                          std::string(py::str(obj.get_type().attr("__name__"))));
  // dtype.kind and dtype.itemsize are C-level attributes; str(dtype) runs Python code, so
  // it is only used when the fast test fails (bfloat16, or an error to report).
  py::object dt = obj.attr("dtype");
  const std::string kind = py::str(dt.attr("kind"));
  const int64_t size = dt.attr("itemsize").cast<int64_t>();
  bool ok = (spec.dtype == "f32" && kind == "f" && size == 4) ||
            (spec.dtype == "f64" && kind == "f" && size == 8) ||
            (spec.dtype == "i64" && kind == "i" && size == 8) ||
            (spec.dtype == "i1" && kind == "b" && size == 1) ||
            (spec.dtype == "bf16" && kind == "u" && size == 2);
  std::string got = ok ? "" : std::string(py::str(dt));
  std::string want = numpy_dtype(spec.dtype);
  ok = ok || got == want || (spec.dtype == "bf16" && got == "bfloat16");
  if (!ok)
    throw py::value_error(what + ": dtype " + got + ", expected " + want + " (manifest " +
                          spec.dtype + ")");
  std::vector<int64_t> shape = obj.attr("shape").cast<std::vector<int64_t>>();
  if (shape != spec.shape)
    throw py::value_error(what + ": shape " + shape_str(shape) + ", expected " + shape_str(spec.shape));
  // Big-endian data ('>f4'): the same values in this machine's byte order, not its bytes.
  if (!dt.attr("isnative").cast<bool>())
    return np.attr("ascontiguousarray")(obj, py::arg("dtype") = dt.attr("newbyteorder")("="));
  return np.attr("ascontiguousarray")(obj);
}

const TensorSpec& param_spec(const Model& m, const std::string& name) {
  for (const TensorSpec& s : m.params())
    if (s.name == name) return s;
  throw py::key_error("no param named '" + name + "'");
}

py::object empty_array(const TensorSpec& spec) {
  return py::module_::import("numpy").attr("empty")(shape_tuple(spec.shape), numpy_dtype(spec.dtype));
}

void* buffer_ptr(const py::object& arr, bool writable) {
  return py::buffer(arr).request(writable).ptr;
}

}  // namespace

PYBIND11_MODULE(_runtime, mod) {
  mod.doc() = "gptc runtime: load and run a compiled gptc artifact folder";

  mod.def("version", &gptc_version, "The runtime's version (gptc_version in the C API).");
  mod.def(
      "sample",
      [](py::buffer logits, float temperature, int64_t top_k, float top_p, uint64_t seed,
         uint64_t draw) {
        py::buffer_info b = logits.request();
        if (b.format != py::format_descriptor<float>::format() || b.ndim != 1 ||
            b.strides[0] != (py::ssize_t)sizeof(float))
          throw py::value_error("sample: logits must be a contiguous 1-D float32 array");
        return gptc::rt::sample(static_cast<const float*>(b.ptr), (int64_t)b.shape[0],
                                temperature, top_k, top_p, seed, draw);
      },
      py::arg("logits"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
      py::arg("seed"), py::arg("draw"),
      "The token gptc's sampler draws from a float32 row of logits (gptc/sample.hpp).");

  // gptc::rt::Error derives from std::runtime_error: pybind11 raises it as RuntimeError
  // carrying the runtime's one-line message.
  // Shared: a Generator keeps the decode step and prefill it runs alive.
  py::class_<Model, std::shared_ptr<Model>>(mod, "Model")
      .def(py::init([](const std::string& dir, const std::shared_ptr<Model>& weights_of) {
             return std::shared_ptr<Model>(Model::load(dir, weights_of.get()));
           }),
           py::arg("dir"), py::arg("weights_of") = nullptr,
           "Load an artifact folder (manifest.json, kernels.so, weights.safetensors); with "
           "weights_of, the params it holds alike are its buffers, shared (Model::load).")
      .def_property_readonly("dir", &Model::dir)
      .def_property_readonly("inputs", [](const Model& m) { return spec_list(m.inputs()); },
                             "[(name, dtype, shape)] of the inputs, in call order")
      .def_property_readonly("results", [](const Model& m) { return spec_list(m.results()); })
      .def_property_readonly("params", [](const Model& m) { return spec_list(m.params()); })
      .def_property_readonly(
          "shared_params",
          [](const Model& m) {
            std::vector<std::string> names;
            for (size_t i = 0; i < m.params().size(); ++i)
              if (m.param_shared(i)) names.push_back(m.params()[i].name);
            return names;
          },
          "Names of the params whose buffers are weights_of's (Model::load), in order")
      .def_property_readonly("arena_bytes", &Model::arena_bytes)
      .def_property_readonly(
          "transfers",
          [](const Model& m) {
            const Model::Transfers t = m.transfers();
            return py::make_tuple(t.to_device, t.to_host);
          },
          "(bytes to the device, bytes to the host) a CUDA artifact's runs and parameter "
          "reads and writes have moved since the load; (0, 0) for a CPU artifact")
      .def_property_readonly(
          "waits", [](const Model& m) { return m.transfers().waits; },
          "The times a CUDA artifact's runs, copies and parameter reads and writes have waited "
          "for the device since the load (a run waits once, for its results); 0 for a CPU one")
      .def(
          "run",
          [](Model& m, const std::vector<py::object>& inputs) {
            if (inputs.size() != m.inputs().size())
              throw py::value_error("run: got " + std::to_string(inputs.size()) +
                                    " inputs, the model takes " + std::to_string(m.inputs().size()));
            std::vector<py::object> keep;  // contiguous arrays alive through the call
            std::vector<const void*> in;
            for (size_t i = 0; i < inputs.size(); ++i) {
              const TensorSpec& s = m.inputs()[i];
              keep.push_back(checked_array(inputs[i], s, "input '" + s.name + "'"));
              in.push_back(buffer_ptr(keep.back(), false));
            }
            py::list outs;
            std::vector<void*> out;
            for (const TensorSpec& s : m.results()) {
              py::object a = empty_array(s);
              out.push_back(buffer_ptr(a, true));
              outs.append(a);
            }
            {
              py::gil_scoped_release nogil;
              m.run(in, out);
            }
            return outs;
          },
          py::arg("inputs"), "Run once: list of numpy inputs -> list of fresh numpy results.")
      .def(
          "param",
          [](const Model& m, const std::string& name) {
            const TensorSpec& s = param_spec(m, name);
            py::object a = empty_array(s);
            std::memcpy(buffer_ptr(a, true), m.param_data(name), s.nbytes);
            return a;
          },
          py::arg("name"), "A copy of a parameter as a numpy array.")
      .def(
          "set_param",
          [](Model& m, const std::string& name, const py::object& value) {
            const TensorSpec& s = param_spec(m, name);
            py::object a = checked_array(value, s, "param '" + name + "'");
            std::memcpy(m.param_data(name), buffer_ptr(a, false), s.nbytes);
          },
          py::arg("name"), py::arg("value"),
          "Overwrite a parameter (same dtype and shape). Not while run() is in progress.")
      .def("set_num_threads", &Model::set_num_threads, py::arg("n"),
           "Threads for the kernels' parallel loops (0: one per core); bits never change.")
      .def(
          "symbol_address",
          [](const Model& m, const std::string& name) { return (uintptr_t)m.symbol(name); },
          py::arg("name"),
          "The address of a symbol of this model's own copy of kernels.so (0 if none), for "
          "tools that call into it with ctypes.")
      .def("save_weights", &Model::save_weights, py::arg("path"),
           "Write the parameters to a safetensors file, atomically; not the shared ones, which "
           "are weights_of's to write.")
      .def("__repr__", [](const Model& m) {
        return "<gptc._runtime.Model '" + m.dir() + "': " + std::to_string(m.params().size()) +
               " params, " + std::to_string(m.inputs().size()) + " inputs, " +
               std::to_string(m.results().size()) + " results>";
      });

  py::class_<gptc::rt::Generator>(mod, "Generator")
      .def(py::init([](std::shared_ptr<Model> decode, std::shared_ptr<Model> prefill,
                       std::vector<std::shared_ptr<Model>> shorter) {
             return gptc::rt::Generator::from_models(std::move(decode), std::move(prefill),
                                                     std::move(shorter));
           }),
           py::arg("decode"), py::arg("prefill"),
           py::arg("shorter") = std::vector<std::shared_ptr<Model>>{},
           "The runtime's generation loop (gptc/generate.hpp) over a loaded decode step, "
           "prefill and shorter decode steps (gptc.Generator's programs, whose weights and "
           "threads it shares).")
      .def(
          "generate_batch",
          [](gptc::rt::Generator& g, const std::vector<std::vector<int64_t>>& prompts,
             int64_t n, float temperature, int64_t top_k, float top_p, uint64_t seed,
             int64_t vocab) {
            gptc::rt::SampleSettings s{temperature, top_k, top_p, seed, vocab};
            py::gil_scoped_release nogil;
            return g.generate_batch(prompts, n, s);
          },
          py::arg("prompts"), py::arg("n"), py::arg("temperature"), py::arg("top_k"),
          py::arg("top_p"), py::arg("seed"), py::arg("vocab"),
          "batch prompts (of any lengths) -> each row's n new ids (row b drawn with seed + b).");
}
