#include "oracle/batch.hpp"

#include <string>

namespace dcp::oracle {
namespace {

// Elements [begin, end) of dimension `axis` of t, every other dimension whole; the dimension must
// hold the batch's `total` rows.
Expected<StTensor> slice(const StTensor& t, size_t axis, int64_t begin, int64_t end, int64_t total,
                         std::string_view source, const std::string& name) {
  if (t.shape.size() <= axis || t.shape[axis] != total) {
    return DCP_ERROR(source, ": tensor '", name, "': shape ", shape_string(t.shape),
                     "; expected dimension ", axis, " to hold the batch's ", total, " rows");
  }
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= t.shape[d];
  for (size_t d = axis + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
  StTensor out;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.shape[axis] = end - begin;
  const int64_t rows = t.shape[axis];
  if (t.bytes != nullptr) {  // read in place (K, V: sliced by key, a contiguous run of bytes)
    if (outer != 1) {
      return DCP_ERROR(source, ": tensor '", name, "': held in place, sliced along dimension ",
                       axis, "; only the first dimension slices in place");
    }
    out.bytes = t.bytes + begin * inner * dtype_bytes(t.dtype);
    out.keep = t.keep;
    return out;
  }
  auto copy = [&](const auto& from, auto& to) {
    for (int64_t o = 0; o < outer; ++o) {
      const auto first = from.begin() + static_cast<std::ptrdiff_t>((o * rows + begin) * inner);
      to.insert(to.end(), first, first + static_cast<std::ptrdiff_t>((end - begin) * inner));
    }
  };
  if (t.dtype == DType::i64) {
    copy(t.ints, out.ints);
  } else {
    copy(t.values, out.values);
  }
  return out;
}

Expected<std::vector<int64_t>> prefix_sums(const StFile& f, const char* name, int64_t total,
                                           const char* total_of, std::string_view source) {
  const StTensor& t = f.tensors.at(name);
  if (t.dtype != DType::i64 || t.shape.size() != 1 || t.shape[0] < 2) {
    return DCP_ERROR(source, ": tensor '", name, "': ", dtype_name(t.dtype), " ",
                     shape_string(t.shape), "; expected I64 [B+1] with B >= 1 requests");
  }
  const std::vector<int64_t>& cu = t.ints;
  if (cu.front() != 0) {
    return DCP_ERROR(source, ": tensor '", name, "': element 0 = ", cu.front(), "; expected 0");
  }
  for (size_t b = 1; b < cu.size(); ++b) {
    if (cu[b] < cu[b - 1]) {
      return DCP_ERROR(source, ": tensor '", name, "': element ", b, " = ", cu[b], " < element ",
                       b - 1, " = ", cu[b - 1], "; prefix sums never decrease");
    }
  }
  if (cu.back() != total) {
    return DCP_ERROR(source, ": tensor '", name, "': last element ", cu.back(), " != ", total_of,
                     " = ", total);
  }
  return cu;
}

}  // namespace

Expected<BatchOffsets> batch_offsets(const StFile& f, std::string_view source) {
  const bool has_q = f.tensors.count("cu_seqlens_q") > 0,
             has_k = f.tensors.count("cu_seqlens_k") > 0;
  if (!has_q && !has_k) return BatchOffsets{};
  if (has_q != has_k) {
    return DCP_ERROR(source, ": tensor '", has_q ? "cu_seqlens_q" : "cu_seqlens_k", "' without '",
                     has_q ? "cu_seqlens_k" : "cu_seqlens_q", "'; a batch gives both");
  }
  for (const char* required : {"q", "k"}) {
    if (!f.tensors.count(required)) return DCP_ERROR(source, ": missing tensor '", required, "'");
  }
  const StTensor &q = f.tensors.at("q"), &k = f.tensors.at("k");
  if (q.shape.empty() || k.shape.empty()) {
    return DCP_ERROR(source, ": tensors 'q' and 'k' need a first dimension in a batch");
  }
  BatchOffsets b;
  auto cu_q = prefix_sums(f, "cu_seqlens_q", q.shape[0], "q's T_total", source);
  if (!cu_q) return cu_q.status();
  auto cu_k = prefix_sums(f, "cu_seqlens_k", k.shape[0], "k's S_total", source);
  if (!cu_k) return cu_k.status();
  if (cu_q->size() != cu_k->size()) {
    return DCP_ERROR(source, ": tensor 'cu_seqlens_q' has ", cu_q->size(),
                     " elements and 'cu_seqlens_k' ", cu_k->size(), "; both are [B+1]");
  }
  for (size_t r = 1; r < cu_q->size(); ++r) {
    if ((*cu_q)[r] == (*cu_q)[r - 1]) {
      return DCP_ERROR(source, ": tensor 'cu_seqlens_q': request ", r - 1,
                       " has no query token; every request decodes at least one");
    }
  }
  for (const char* scale : {"k_scale", "v_scale"}) {
    if (f.tensors.count(scale) && f.tensors.at(scale).shape.size() == 2)
      return DCP_ERROR(source, ": tensor '", scale, "': ", shape_string(f.tensors.at(scale).shape),
                       " is by token; a batch's scales are the batch's, [1] or [Hkv]");
  }
  b.cu_q = std::move(*cu_q);
  b.cu_k = std::move(*cu_k);
  return b;
}

Expected<std::vector<StFile>> split_case_file(const StFile& f, std::string_view source) {
  auto b = batch_offsets(f, source);
  if (!b) return b.status();
  if (b->cu_q.empty()) return std::vector<StFile>{f};
  std::vector<StFile> out;
  for (int64_t r = 0; r < b->requests(); ++r) {
    StFile one;
    one.metadata = f.metadata;
    for (const auto& [name, t] : f.tensors) {
      if (name == "cu_seqlens_q" || name == "cu_seqlens_k") continue;
      const bool by_query = name == "q" || name == "q_pos" || name == "topk";
      const bool by_key = name == "k" || name == "v";
      if (!by_query && !by_key) {
        one.tensors[name] = t;  // sink, scales, and names case_from_file refuses
        continue;
      }
      const std::vector<int64_t>& cu = by_query ? b->cu_q : b->cu_k;
      auto s = slice(t, 0, cu[r], cu[r + 1], cu.back(), source, name);
      if (!s) return s.status();
      one.tensors[name] = std::move(*s);
    }
    out.push_back(std::move(one));
  }
  return out;
}

Expected<std::vector<StFile>> split_result_file(const StFile& result, const StFile& case_file,
                                                std::string_view source) {
  auto b = batch_offsets(case_file, "the case");
  if (!b) return b.status();
  for (const char* name : {"cu_seqlens_q", "cu_seqlens_k"}) {
    if (result.tensors.count(name)) {
      return DCP_ERROR(source, ": tensor '", name,
                       "' in a result; the batch's offsets are the case's");
    }
  }
  if (b->cu_q.empty()) return std::vector<StFile>{result};
  const bool heads_first =
      result.metadata.count("lse_layout") && result.metadata.at("lse_layout") == "h_t";
  std::vector<StFile> out;
  for (int64_t r = 0; r < b->requests(); ++r) {
    StFile one;
    one.metadata = result.metadata;
    for (const auto& [name, t] : result.tensors) {
      // The axis of the batch's rows: tokens, after the ranks for partials and after the heads
      // for h_t LSEs; keys for the owner map.
      size_t axis = 0;
      if (name == "o_partial") axis = 1;
      if (name == "lse") axis = heads_first ? 1 : 0;
      if (name == "lse_partial") axis = heads_first ? 2 : 1;
      const bool by_key = name == "owner";
      if (name != "o" && name != "lse" && name != "o_partial" && name != "lse_partial" && !by_key) {
        one.tensors[name] = t;  // result_from_file names what it does not know
        continue;
      }
      const std::vector<int64_t>& cu = by_key ? b->cu_k : b->cu_q;
      auto s = slice(t, axis, cu[r], cu[r + 1], cu.back(), source, name);
      if (!s) return s.status();
      one.tensors[name] = std::move(*s);
    }
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace dcp::oracle
