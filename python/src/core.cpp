// core.cpp — dcp_verify._core: the oracle and the project's file format for Python.
//
// Arrays come in through DLPack or the buffer protocol (numpy, torch, anything exporting either;
// CPU memory, any strides) and go out as numpy arrays that own their memory. The functions here
// take and return plain mappings; python/dcp_verify/__init__.py gives them their public shape.
//
//   tensors, metadata, dtypes = _core.read_file("case.safetensors")
//   o, lse = _core.reference(tensors, metadata, dtypes, "fast", "case")
//   _core.write_file("result.safetensors", tensors, metadata, dtypes)
//   report_json, text = _core.check_files("case.safetensors", "result.safetensors", "fast",
//   "sound")
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/check.hpp"
#include "harness/report.hpp"
#include "harness/tiers.hpp"
#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "oracle/dtype.hpp"
#include "oracle/safetensors.hpp"
#include "oracle/text.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using dcp::oracle::DType;
using dcp::oracle::StFile;
using dcp::oracle::StTensor;

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;
using Numpy = nb::ndarray<nb::numpy>;

// The storage format of an array's element type; false for one the files cannot hold.
bool array_dtype(const nb::dlpack::dtype& t, DType& out, bool& is_int) {
  is_int = false;
  if (t.lanes != 1) return false;
  const auto code = static_cast<nb::dlpack::dtype_code>(t.code);
  if (code == nb::dlpack::dtype_code::Float) {
    if (t.bits == 64)
      out = DType::f64;
    else if (t.bits == 32)
      out = DType::f32;
    else if (t.bits == 16)
      out = DType::f16;
    else
      return false;
    return true;
  }
  if (code == nb::dlpack::dtype_code::Bfloat && t.bits == 16) {
    out = DType::bf16;
    return true;
  }
  if (code == nb::dlpack::dtype_code::Int && t.bits == 64) {
    out = DType::i64;
    is_int = true;
    return true;
  }
  return false;
}

// One element of a CPU array of the given format, exactly, as a double.
double element(const uint8_t* p, const nb::dlpack::dtype& t) {
  const auto code = static_cast<nb::dlpack::dtype_code>(t.code);
  if (code == nb::dlpack::dtype_code::Bfloat) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    return dcp::oracle::bf16_bits_to_double(b);
  }
  if (t.bits == 16) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return dcp::oracle::f16_bits_to_double(h);
  }
  if (t.bits == 32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  double d;
  std::memcpy(&d, p, 8);
  return d;
}

// The array under `name` as a file tensor stored in `format` (its own format when empty). Raises
// TypeError for what is not a CPU array of a supported type, ValueError for values the format
// cannot hold exactly.
StTensor to_tensor(const std::string& name, nb::handle obj, const std::string& format) {
  AnyArray a;
  if (!nb::try_cast(obj, a))
    throw nb::type_error(("tensor '" + name +
                          "': expected a CPU array (numpy, torch or any DLPack exporter), got " +
                          nb::type_name(obj.type()).c_str())
                             .c_str());
  DType d;
  bool is_int;
  if (!array_dtype(a.dtype(), d, is_int))
    throw nb::type_error(("tensor '" + name +
                          "': element type not supported; expected float64, float32, float16, "
                          "bfloat16 or int64")
                             .c_str());
  StTensor t;
  int64_t n = 1;
  for (size_t i = 0; i < a.ndim(); ++i) {
    t.shape.push_back(static_cast<int64_t>(a.shape(i)));
    n *= static_cast<int64_t>(a.shape(i));
  }
  const auto* base = static_cast<const uint8_t*>(a.data());
  const size_t es = a.dtype().bits / 8;
  std::vector<int64_t> idx(a.ndim(), 0);
  const auto offset = [&] {
    int64_t at = 0;
    for (size_t k = 0; k < a.ndim(); ++k) at += idx[k] * a.stride(k);
    return at;
  };
  const auto next = [&] {
    for (size_t k = a.ndim(); k-- > 0;) {
      if (++idx[k] < static_cast<int64_t>(a.shape(k))) return;
      idx[k] = 0;
    }
  };
  if (is_int) {
    if (!format.empty() && format != "I64")
      throw nb::value_error(
          ("tensor '" + name + "': an int64 array cannot be stored as " + format).c_str());
    t.dtype = DType::i64;
    t.ints.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i, next())
      std::memcpy(&t.ints[static_cast<size_t>(i)], base + offset() * static_cast<int64_t>(es), 8);
    return t;
  }
  t.dtype = d;
  if (!format.empty()) {
    const auto f = dcp::oracle::parse_dtype(format);
    if (!f)
      throw nb::value_error(("tensor '" + name + "': unknown format '" + format + "'; expected " +
                             dcp::oracle::float_dtype_names())
                                .c_str());
    t.dtype = *f;
  }
  t.values.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i, next()) {
    const double x = element(base + offset() * static_cast<int64_t>(es), a.dtype());
    if (!dcp::oracle::representable(t.dtype, x))
      throw nb::value_error(("tensor '" + name + "': element " + std::to_string(i) + " (" +
                             std::to_string(x) + ") is not exactly a " +
                             std::string(dcp::oracle::dtype_name(t.dtype)) +
                             " value; round it first or store it wider")
                                .c_str());
    t.values[static_cast<size_t>(i)] = x;
  }
  return t;
}

StFile to_file(const nb::dict& tensors, const std::map<std::string, std::string>& metadata,
               const std::map<std::string, std::string>& formats) {
  StFile f;
  for (auto [k, v] : tensors) {
    if (!nb::isinstance<nb::str>(k)) throw nb::type_error("tensor names must be strings");
    const std::string name = nb::cast<std::string>(k);
    const auto it = formats.find(name);
    f.tensors[name] = to_tensor(name, v, it == formats.end() ? "" : it->second);
  }
  for (const auto& [name, _] : formats)
    if (f.tensors.find(name) == f.tensors.end())
      throw nb::value_error(("dtypes: no tensor named '" + name + "'").c_str());
  f.metadata = metadata;
  return f;
}

// A float64 (or int64) numpy array that owns a copy of `values`.
template <class T>
Numpy owned(const std::vector<T>& values, const dcp::oracle::Shape& shape) {
  auto* data = new std::vector<T>(values);
  nb::capsule owner(data, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  return Numpy(data->data(), dims.size(), dims.data(), owner, nullptr, nb::dtype<T>());
}

// read_file's arrays: the format of each tensor is in `dtypes`; 16-bit and fp8 floats come back
// as float32 (numpy has no bfloat16 or fp8; every such value is exact in float32), F64 as float64,
// I64 as int64.
std::tuple<nb::dict, std::map<std::string, std::string>, std::map<std::string, std::string>>
read_file(const std::string& path) {
  auto f = dcp::oracle::read_safetensors(path);
  if (!f) throw nb::value_error(f.status().message().c_str());
  nb::dict tensors;
  std::map<std::string, std::string> dtypes;
  for (const auto& [name, t] : f->tensors) {
    if (t.dtype == DType::i64) {
      tensors[name.c_str()] = owned(t.ints, t.shape);
      dtypes[name] = "I64";
      continue;
    }
    if (t.dtype == DType::f64) {
      tensors[name.c_str()] = owned(t.values, t.shape);
    } else {
      std::vector<float> v(t.values.begin(), t.values.end());
      tensors[name.c_str()] = owned(v, t.shape);
    }
    dtypes[name] = std::string(dcp::oracle::dtype_name(t.dtype));
  }
  return {tensors, f->metadata, dtypes};
}

void write_file(const std::string& path, const nb::dict& tensors,
                const std::map<std::string, std::string>& metadata,
                const std::map<std::string, std::string>& dtypes) {
  const StFile f = to_file(tensors, metadata, dtypes);
  if (const auto st = dcp::oracle::check_st_file(f, path); !st)
    throw nb::value_error(st.message().c_str());
  if (const auto st = dcp::oracle::write_safetensors(path, f); !st)
    throw nb::value_error(st.message().c_str());
}

// Ctrl-C inside the oracle: it polls between blocks of keys; Python's handler runs when the
// polling thread is the main one, and leaves KeyboardInterrupt set, raised once the work returns.
struct PythonSignals {
  bool signalled = false;
  dcp::oracle::Watch watch() {
    dcp::oracle::Watch w;
    w.stop = [this] {
      nb::gil_scoped_acquire gil;
      signalled = signalled || PyErr_CheckSignals() != 0;
      return signalled;
    };
    return w;
  }
};

std::pair<Numpy, Numpy> reference_of(const dcp::oracle::Case& c, dcp::oracle::Tier tier) {
  dcp::oracle::Expected<dcp::oracle::Attention> ref(dcp::oracle::Attention{});
  PythonSignals signals;
  {
    nb::gil_scoped_release release;  // the oracle's threads need no Python
    ref = dcp::oracle::reference(c, tier, signals.watch());
  }
  if (signals.signalled) throw nb::python_error();
  if (!ref) throw nb::value_error(ref.status().message().c_str());
  return {owned(ref->o.data, ref->o.shape), owned(ref->lse.data, ref->lse.shape)};
}

dcp::oracle::Tier tier_of(const std::string& tier) {
  const std::optional<dcp::oracle::Tier> t = dcp::harness::parse_tier(tier);
  if (!t) throw nb::value_error(("tier: expected 'fast' or 'certify', got '" + tier + "'").c_str());
  return *t;
}

// The judgement of a result file against its case, as `dcp-verify check` makes it
// (harness/check.hpp) but in this process: the JSON report (docs/cli.md) and the text the command
// prints. Files that cannot be judged, or a part the oracle cannot judge, raise ValueError with the
// command's line.
std::pair<std::string, std::string> check_files(const std::string& case_path,
                                                const std::string& result_path,
                                                const std::string& tier, const std::string& bound) {
  namespace h = dcp::harness;
  const dcp::oracle::Tier t = tier_of(tier);
  const std::optional<dcp::props::BoundTier> gate = h::parse_bound(bound);
  if (!gate)
    throw nb::value_error(
        ("bound: expected 'sound' or 'statistical', got '" + bound + "'").c_str());
  // K and V decoded, not mapped: a case file truncated meanwhile is an error, not a SIGBUS that
  // would end the Python process.
  const h::CheckParams params{case_path, result_path, t, *gate, /*in_place=*/false};
  const auto t0 = std::chrono::steady_clock::now();
  PythonSignals signals;
  dcp::oracle::Expected<h::CheckPlan> plan = dcp::oracle::Status();
  dcp::oracle::ResultCheck all;
  dcp::oracle::Status judging;
  {
    nb::gil_scoped_release release;
    plan = h::plan_check(params, h::machine_limits());
    if (plan) {
      std::vector<std::optional<dcp::oracle::PartCheck>> judged(static_cast<size_t>(plan->planned));
      judging = h::judge_parts(*plan, h::assign_parts(*plan, 1), 0, signals.watch(), judged, {});
      all = h::collect_parts(*plan, judged);
    }
  }
  if (signals.signalled) throw nb::python_error();
  // One line, valid UTF-8 (a file name's other bytes as \xNN), as the command says it.
  const auto refusal = [](const std::string& why) {
    return nb::value_error(dcp::oracle::utf8_escaped(dcp::oracle::one_line(why)).c_str());
  };
  if (!plan) throw refusal(plan.status().message());
  if (!judging) throw refusal(judging.message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {h::utf8_json(h::check_report(*plan, all, secs)).dump(),
          h::check_text(*plan, all, {.seconds = secs})};
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "dcp-verify's oracle and file format (the public API is the dcp_verify package)";
  m.def("read_file", &read_file, "path"_a,
        "(tensors, metadata, dtypes) of a safetensors file; 16-bit and fp8 tensors as float32");
  m.def("write_file", &write_file, "path"_a, "tensors"_a, "metadata"_a, "dtypes"_a,
        "Writes arrays (stored in dtypes[name] where given, else their own format) and string "
        "metadata as a safetensors file, whole or not at all");
  m.def(
      "reference_file",
      [](const std::string& path, const std::string& tier) {
        const dcp::oracle::Tier t = tier_of(tier);
        auto c = dcp::oracle::load_case(path);
        if (!c) throw nb::value_error(c.status().message().c_str());
        return reference_of(*c, t);
      },
      "path"_a, "tier"_a, "(o, lse) float64 of a case file");
  m.def(
      "reference",
      [](const nb::dict& tensors, const std::map<std::string, std::string>& metadata,
         const std::map<std::string, std::string>& dtypes, const std::string& tier,
         const std::string& source) {
        const dcp::oracle::Tier t = tier_of(tier);
        const StFile f = to_file(tensors, metadata, dtypes);
        auto c = dcp::oracle::case_from_file(f, source);
        if (!c) throw nb::value_error(c.status().message().c_str());
        return reference_of(*c, t);
      },
      "tensors"_a, "metadata"_a, "dtypes"_a, "tier"_a, "source"_a,
      "(o, lse) float64 of a case given as arrays and string metadata");
  m.def("check_files", &check_files, "case"_a, "result"_a, "tier"_a, "bound"_a,
        "(report as JSON, report as text) of a result file judged against its case file");
}
