// bridge.cpp — libdcpv_bridge.so: a C plug-in (include/dcp_verify/impl.h) whose levels are served
// by another process, over a stream socket it inherits. The Python package (python/dcp_verify)
// runs `dcp-verify properties --impl libdcpv_bridge.so` with one end of a socket pair and serves
// each level from the user's Python object on the other; any language can do the same.
//
// The socket's descriptor is in the environment variable DCPV_BRIDGE_FD. Every message, both
// ways, is a frame: an 8-byte little-endian length n, n bytes of JSON (the header), then the
// header's "bytes" bytes of payload: the tensors the header lists, each {"name", "dtype" (a name
// of kWireNames below: f32, bf16, fp8e4m3, i8, ...), "shape", "offset", "nbytes"}, dense and
// row-major, in the payload at "offset". It speaks ABI version 4 (dcpv_get_impl_v2):
//   dcpv_get_impl_v2: -> {"op": "hello", "abi": 4}
//                   <- {"abi": 4, "name": ..., "levels": ["paged", "partial", ...], "claim": {the
//                       dcpv_claim fields by name, formats as "f32" / "bf16" / "f16"},
//                       "kv_dequant": "f32", "lacks": ["softcap", ..., "alibi", "token_scales",
//                       "page_scales"], "page_layout": "NHD" | "HND"} (a reply without "abi" 3
//                       or more lacks alibi and token_scales; one without 4, page_scales)
//   a level:        -> {"op": "paged" | "partial" | "combine" | "step", "args": {the scalar fields
//                       of its dcpv_*_args by name}, "tensors": [its input tensors; absent ones
//                       left out; the paged level's pool in its storage format, as stored]}
//                   <- {"ok": true, "tensors": [o, lse, and for step optionally o_partial and
//                       lse_partial, all f32 of the shapes impl.h gives]}
//                   <- {"ok": false, "error": "one line"}   (the level failed)
// The ranks' threads call at once: their requests are sent as they come, without waiting for the
// replies before them, and the server answers them in the order it received them (each reply is
// read by the thread whose request it answers, in that order). A server that closes the socket
// fails the calls in flight and every later one.
// Where the environment variable DCPV_BRIDGE_SHM_FD names a shared-memory file the server mapped
// too, payloads go through it instead of the socket where they fit: each request in flight has a
// region of its own, its payload at the region's start, its header saying {"shm_at": offset,
// "shm_bytes": n} (and "bytes": 0), with room for the reply after it: {"reply_at": offset,
// "reply_room": bytes}. A reply that fits its room is placed there, its header saying
// {"shm_at": offset, "shm_bytes": n}, its tensors' offsets counted from there; one that does not
// (or a request without a room) comes on the socket.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dcp_verify/impl.h"
#include "plugin/bridge/region_ring.hpp"

namespace {

using nlohmann::json;

// The largest header accepted from the server: a guard against a stream that is not this
// protocol, far above any real header (a few hundred bytes).
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 20;

struct Connection {
  int fd = -1;
  std::string name;
  char* shm = nullptr;  // the shared region (DCPV_BRIDGE_SHM_FD), or null: payloads on the socket
  size_t shm_bytes = 0;
  std::mutex send;  // one frame written at a time, in the order of the tickets

  // Under mu: the requests sent and the replies read (a ticket each, in order), their regions of
  // the shared memory, and whether the stream broke.
  std::mutex mu;
  std::condition_variable turn;
  uint64_t sent = 0, answered = 0;
  dcp::bridge::RegionRing regions{0};  // sized when the shared region is mapped
  std::string broken;                  // why the stream broke; empty while it works
};
Connection g_conn;
dcpv_impl_v2 g_impl{};

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A tensor of either version, as the wire sees it: its elements' name and size, and a strided
// view (elements).
struct Strided {
  void* data;
  const char* dtype;
  size_t bytes;
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;
};

Strided strided(const dcpv_tensor& t) {
  const char* name = t.dtype == DCPV_F32    ? "f32"
                     : t.dtype == DCPV_F16  ? "f16"
                     : t.dtype == DCPV_BF16 ? "bf16"
                                            : "i64";
  return {t.data, name,    t.dtype == DCPV_I64 ? 8u : t.dtype == DCPV_F32 ? 4u : 2u,
          t.ndim, t.shape, t.strides};
}

// The wire's name of each DLPack dtype a version-2 level is handed: one row a dtype.
struct WireName {
  uint8_t code, bits;
  const char* name;
};
constexpr WireName kWireNames[] = {{DCPV_DL_FLOAT, 32, "f32"},
                                   {DCPV_DL_FLOAT, 16, "f16"},
                                   {DCPV_DL_BFLOAT, 16, "bf16"},
                                   {DCPV_DL_FLOAT8_E4M3FN, 8, "fp8e4m3"},
                                   {DCPV_DL_FLOAT8_E5M2, 8, "fp8e5m2"},
                                   {DCPV_DL_FLOAT8_E4M3FNUZ, 8, "fp8e4m3fnuz"},
                                   {DCPV_DL_INT, 8, "i8"},
                                   {DCPV_DL_INT, 32, "i32"},
                                   {DCPV_DL_INT, 64, "i64"}};

Strided strided(const dcpv_dltensor& t) {
  const char* name = "?";  // never handed to the bridge
  for (const WireName& w : kWireNames)
    if (t.dtype.code == w.code && t.dtype.bits == w.bits) name = w.name;
  return {t.data, name, static_cast<size_t>(t.dtype.bits / 8), t.ndim, t.shape, t.strides};
}

int64_t numel(const Strided& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

// Calls fn(i, at) for every element of t in row-major order: i its dense index, at its offset in
// elements under t's strides.
template <class Fn>
void for_each_element(const Strided& t, Fn fn) {
  const int64_t n = numel(t);
  std::vector<int64_t> idx(static_cast<size_t>(t.ndim), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (int32_t d = 0; d < t.ndim; ++d) at += idx[static_cast<size_t>(d)] * t.strides[d];
    fn(i, at);
    for (int32_t d = t.ndim - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.shape[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

// Whether t's strides are row-major and dense (one copy moves it).
bool dense_rows(const Strided& t) {
  int64_t want = 1;
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != want) return false;
    want *= t.shape[d];
  }
  return true;
}

// A request's tensors, listed for its header with their place in the payload, and copied into the
// payload only once its place is known (the shared region, else a buffer for the socket).
struct Request {
  json tensors = json::array();
  std::vector<Strided> parts;
  size_t bytes = 0;  // the payload's size

  template <class Tensor>
  void put(const char* name, const Tensor& tensor) {
    const Strided t = strided(tensor);
    if (t.data == nullptr) return;
    const size_t n = static_cast<size_t>(numel(t)) * t.bytes;
    json shape = json::array();
    for (int32_t d = 0; d < t.ndim; ++d) shape.push_back(t.shape[d]);
    tensors.push_back(
        {{"name", name}, {"dtype", t.dtype}, {"shape", shape}, {"offset", bytes}, {"nbytes", n}});
    parts.push_back(t);
    bytes += n;
  }

  // The payload at out (bytes of it): each tensor dense and row-major, whatever its strides.
  void copy_to(char* out) const {
    for (const Strided& t : parts) {
      const size_t es = t.bytes, n = static_cast<size_t>(numel(t));
      if (dense_rows(t)) {
        if (n > 0) std::memcpy(out, t.data, n * es);
      } else {
        for_each_element(t, [&](int64_t i, int64_t at) {
          std::memcpy(out + static_cast<size_t>(i) * es, static_cast<const char*>(t.data) + at * es,
                      es);
        });
      }
      out += n * es;
    }
  }
};

void fail(char* err, size_t err_len, const std::string& why) {
  if (err == nullptr || err_len == 0) return;
  std::snprintf(err, err_len, "%s", why.c_str());
}

// Reads the next reply's header and payload (the payload copied out of the shared region where
// it came that way): `room`, its request's room for it there (empty: none), `most`, the bytes its
// tensors take at most. False with the reason on a broken stream or a reply outside those.
bool read_reply(json& reply, std::vector<char>& reply_payload, dcp::bridge::Region room,
                size_t most, std::string& why) {
  uint64_t m = 0;
  if (!read_all(g_conn.fd, &m, sizeof m) || m > kMaxHeaderBytes) {
    why = "the server closed the connection or sent a frame that is not this protocol";
    return false;
  }
  std::string body(m, '\0');
  if (!read_all(g_conn.fd, body.data(), m)) {
    why = "the server closed the connection mid-frame";
    return false;
  }
  reply = json::parse(body, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) {
    why = "the server sent a header that is not a JSON object";
    return false;
  }
  const uint64_t bytes = reply.value("bytes", uint64_t{0});
  if (bytes > most) {
    why = "the server sent a reply larger than its level's outputs";
    return false;
  }
  reply_payload.assign(bytes, '\0');
  if (!read_all(g_conn.fd, reply_payload.data(), bytes)) {
    why = "the server closed the connection mid-frame";
    return false;
  }
  if (reply.contains("shm_at")) {  // the reply's tensors in the shared region
    const uint64_t at = reply.value("shm_at", uint64_t{0}),
                   size = reply.value("shm_bytes", uint64_t{0});
    if (g_conn.shm == nullptr || at < room.begin || at > room.end || room.end - at < size) {
      why = "the server placed its reply outside the room its request gave it";
      return false;
    }
    reply_payload.assign(g_conn.shm + at, g_conn.shm + at + size);
  }
  return true;
}

// Sends one request and reads its reply's header and payload (reply_bytes: the most the reply's
// tensors take); false with the reason on a broken stream. The ranks' threads call it at once:
// each request is sent at its turn to write, its reply read at its turn to read.
bool exchange(const json& header, const Request& request, size_t reply_bytes, json& reply,
              std::vector<char>& reply_payload, std::string& why) {
  if (g_conn.fd < 0) {
    why = "no server: DCPV_BRIDGE_FD is not set to an open socket";
    return false;
  }
  const auto broke = [&](const std::string& reason) {
    {
      const std::lock_guard<std::mutex> lock(g_conn.mu);
      if (g_conn.broken.empty()) g_conn.broken = reason;
    }
    g_conn.turn.notify_all();
    why = reason;
    return false;
  };
  constexpr size_t kAlign = dcp::bridge::RegionRing::kAlign;  // the reply's room starts on one too
  const size_t payload_room = (request.bytes + kAlign - 1) / kAlign * kAlign;
  json h = header;
  uint64_t ticket = 0;
  dcp::bridge::Region region;
  {
    const std::lock_guard<std::mutex> send(g_conn.send);
    {
      const std::lock_guard<std::mutex> lock(g_conn.mu);
      if (!g_conn.broken.empty()) {
        why = g_conn.broken;
        return false;
      }
      region = g_conn.regions.take(payload_room + reply_bytes);
      ticket = g_conn.sent++;
    }
    // From here the ticket is taken: whatever fails (an allocation too) breaks the stream, or
    // the calls after this one would wait for its reply forever.
    try {
      const bool shared = !region.empty();
      std::vector<char> payload;  // the socket's
      if (shared) {
        request.copy_to(g_conn.shm + region.begin);
        h["shm_at"] = region.begin;
        h["shm_bytes"] = request.bytes;
        h["reply_at"] = region.begin + payload_room;
        h["reply_room"] = region.end - region.begin - payload_room;
      } else {
        payload.resize(request.bytes);
        request.copy_to(payload.data());
      }
      h["bytes"] = payload.size();
      if (!request.parts.empty()) h["tensors"] = request.tensors;
      const std::string text = h.dump();
      const uint64_t n = text.size();
      if (!write_all(g_conn.fd, &n, sizeof n) || !write_all(g_conn.fd, text.data(), text.size()) ||
          (!shared && !write_all(g_conn.fd, payload.data(), payload.size())))
        return broke("the server closed the connection");
    } catch (const std::exception& e) {
      return broke(std::string("bridge: ") + e.what());
    }
  }
  {
    std::unique_lock<std::mutex> lock(g_conn.mu);
    g_conn.turn.wait(lock, [&] { return g_conn.answered == ticket || !g_conn.broken.empty(); });
    if (!g_conn.broken.empty()) {
      why = g_conn.broken;
      return false;
    }
  }
  const dcp::bridge::Region room =
      region.empty() ? region : dcp::bridge::Region{region.begin + payload_room, region.end};
  try {
    if (!read_reply(reply, reply_payload, room, reply_bytes, why)) return broke(why);
  } catch (const std::exception& e) {  // a header of the wrong types: the stream is lost
    return broke(std::string("bridge: ") + e.what());
  }
  {
    const std::lock_guard<std::mutex> lock(g_conn.mu);
    ++g_conn.answered;
    g_conn.regions.free_oldest();  // this request's: the oldest in flight
  }
  g_conn.turn.notify_all();
  return true;
}

// Copies the reply tensor `name` (f32, the shape of `into`) into `into`; false with the reason.
bool take(const json& reply, const std::vector<char>& payload, const char* name,
          const Strided& into, std::string& why) {
  if (!reply.contains("tensors") || !reply["tensors"].is_array()) {
    why = "the reply lists no tensors";
    return false;
  }
  for (const json& t : reply["tensors"]) {
    if (!t.is_object() || t.value("name", "") != name) continue;
    json want = json::array();
    for (int32_t d = 0; d < into.ndim; ++d) want.push_back(into.shape[d]);
    const uint64_t offset = t.value("offset", uint64_t{0}), nbytes = t.value("nbytes", uint64_t{0});
    if (t.value("dtype", "") != "f32" || t.value("shape", json()) != want ||
        nbytes != static_cast<uint64_t>(numel(into)) * 4 || offset > payload.size() ||
        payload.size() - offset < nbytes) {
      why = std::string("reply tensor ") + name + ": expected f32 of shape " + want.dump() +
            " inside the payload";
      return false;
    }
    const char* src = payload.data() + offset;
    if (dense_rows(into)) {
      if (nbytes > 0) std::memcpy(into.data, src, nbytes);
    } else {
      for_each_element(into, [&](int64_t i, int64_t at) {
        std::memcpy(static_cast<float*>(into.data) + at, src + i * 4, 4);
      });
    }
    return true;
  }
  why = std::string("the reply has no tensor '") + name + "'";
  return false;
}

bool has(const json& reply, const char* name) {
  if (!reply.contains("tensors") || !reply["tensors"].is_array()) return false;
  for (const json& t : reply["tensors"])
    if (t.is_object() && t.value("name", "") == name) return true;
  return false;
}

// One level's round trip: the request, then ok or the server's one-line error, and the reply's
// o and lse copied into the level's outputs (more_reply: f32 elements the reply may add).
int call(const char* op, const json& args, const Request& request, const Strided& o,
         const Strided& lse, json& reply, std::vector<char>& rp, char* err, size_t err_len,
         int64_t more_reply = 0) {
  std::string why;
  const auto reply_bytes = static_cast<size_t>(4 * (numel(o) + numel(lse) + more_reply));
  if (!exchange({{"op", op}, {"args", args}}, request, reply_bytes, reply, rp, why)) {
    fail(err, err_len, why);
    return 1;
  }
  if (!reply.value("ok", false)) {
    fail(err, err_len, reply.value("error", std::string("the server gave no reason")));
    return 1;
  }
  if (!take(reply, rp, "o", o, why) || !take(reply, rp, "lse", lse, why)) {
    fail(err, err_len, why);
    return 1;
  }
  return 0;
}

// The tensors the partial and step levels share (their k_pos aside): q, q_pos, k, v, sink, topk,
// alibi_slopes.
template <class Args>
void put_attention(Request& r, const Args& a) {
  r.put("q", a.q);
  r.put("q_pos", a.q_pos);
  r.put("k", a.k);
  r.put("v", a.v);
  r.put("sink", a.sink);
  r.put("topk", a.topk);
  r.put("alibi_slopes", a.alibi_slopes);
}

// The case's variant, as the partial, paged and step levels state it; kv: the cache's K.
template <class Args, class Tensor>
json variant_args(const Args& a, const Tensor& kv) {
  return {{"shared_latent", a.shared_latent != 0},
          {"lse_base", a.lse_base},
          {"causal", a.causal != 0},
          {"window", a.window},
          {"scale", a.scale},
          {"softcap", a.softcap},
          {"kv_dtype", strided(kv).dtype}};
}

// One rank's heads and shapes, as the partial and paged levels state them.
template <class Args>
json rank_args(const Args& a) {
  return {{"rank", a.rank},
          {"ranks", a.ranks},
          {"tokens", a.tokens},
          {"heads", a.heads},
          {"head_dim", a.head_dim},
          {"v_dim", a.v_dim},
          {"head0", a.head0},
          {"q_heads_total", a.q_heads_total},
          {"kv_heads_total", a.kv_heads_total},
          {"kv_head0", a.kv_head0},
          {"kv_heads", a.kv_heads}};
}

int bridge_partial_unguarded(const dcpv_partial_args* a, char* err, size_t err_len) {
  Request r;
  put_attention(r, *a);
  r.put("k_pos", a->k_pos);
  json args = rank_args(*a);
  args["keys"] = a->keys;
  args.update(variant_args(*a, a->k));
  json reply;
  std::vector<char> rp;
  return call("partial", args, r, strided(a->o), strided(a->lse), reply, rp, err, err_len);
}

int bridge_combine_unguarded(const dcpv_combine_args* a, char* err, size_t err_len) {
  Request r;
  r.put("o_partial", a->o_partial);
  r.put("lse_partial", a->lse_partial);
  const json args = {{"ranks", a->ranks},
                     {"tokens", a->tokens},
                     {"heads", a->heads},
                     {"v_dim", a->v_dim},
                     {"lse_base", a->lse_base}};
  json reply;
  std::vector<char> rp;
  return call("combine", args, r, strided(a->o), strided(a->lse), reply, rp, err, err_len);
}

int bridge_step_unguarded(dcpv_step_args* a, char* err, size_t err_len) {
  Request r;
  put_attention(r, *a);
  json args = {{"ranks", a->ranks},       {"interleave", a->interleave},
               {"tokens", a->tokens},     {"q_heads", a->q_heads},
               {"kv_heads", a->kv_heads}, {"head_dim", a->head_dim},
               {"v_dim", a->v_dim},       {"seq", a->seq}};
  args.update(variant_args(*a, a->k));
  json reply;
  std::vector<char> rp;
  if (call("step", args, r, strided(a->o), strided(a->lse), reply, rp, err, err_len,
           numel(strided(a->o_partial)) + numel(strided(a->lse_partial))) != 0)
    return 1;
  a->wrote_partials = 0;
  std::string why;
  if (has(reply, "o_partial") || has(reply, "lse_partial")) {
    if (!take(reply, rp, "o_partial", strided(a->o_partial), why) ||
        !take(reply, rp, "lse_partial", strided(a->lse_partial), why)) {
      fail(err, err_len, why);
      return 1;
    }
    a->wrote_partials = 1;
  }
  return 0;
}

int bridge_paged_unguarded(const dcpv_paged_args* a, char* err, size_t err_len) {
  Request r;
  for (const auto& [name, t] :
       {std::pair{"q", &a->q}, std::pair{"q_pos", &a->q_pos},
        std::pair{"query_start_loc", &a->query_start_loc}, std::pair{"seq_lens", &a->seq_lens},
        std::pair{"local_seq_lens", &a->local_seq_lens}, std::pair{"block_table", &a->block_table},
        std::pair{"k_cache", &a->k_cache}, std::pair{"v_cache", &a->v_cache},
        std::pair{"k_scale", &a->k_scale}, std::pair{"v_scale", &a->v_scale},
        std::pair{"sink", &a->sink}, std::pair{"topk", &a->topk},
        std::pair{"alibi_slopes", &a->alibi_slopes}})
    r.put(name, *t);
  json args = rank_args(*a);
  args.update({{"interleave", a->interleave},
               {"requests", a->requests},
               {"page_size", a->page_size},
               {"page_layout", a->page_layout == DCPV_PAGES_HND ? "HND" : "NHD"},
               {"scale_grain", a->scale_grain == DCPV_SCALES_BY_PAGE    ? "page"
                               : a->scale_grain == DCPV_SCALES_BY_TOKEN ? "token"
                                                                        : "head"}});
  args.update(variant_args(*a, a->k_cache));
  json reply;
  std::vector<char> rp;
  return call("paged", args, r, strided(a->o), strided(a->lse), reply, rp, err, err_len);
}

// The levels as impl.h calls them: nothing may escape into the C caller.
template <class Args, class Fn>
int guarded(Fn fn, Args* a, char* err, size_t err_len) {
  try {
    return fn(a, err, err_len);
  } catch (const std::exception& e) {
    fail(err, err_len, std::string("bridge: ") + e.what());
  } catch (...) {
    fail(err, err_len, "bridge: unknown exception");
  }
  return 1;
}
int bridge_partial(void*, const dcpv_partial_args* a, char* err, size_t err_len) {
  return guarded(bridge_partial_unguarded, a, err, err_len);
}
int bridge_combine(void*, const dcpv_combine_args* a, char* err, size_t err_len) {
  return guarded(bridge_combine_unguarded, a, err, err_len);
}
int bridge_step(void*, dcpv_step_args* a, char* err, size_t err_len) {
  return guarded(bridge_step_unguarded, a, err, err_len);
}
int bridge_paged(void*, const dcpv_paged_args* a, char* err, size_t err_len) {
  return guarded(bridge_paged_unguarded, a, err, err_len);
}

// A claim format by name; DCPV_I64 for an unknown one, which load_plugin refuses by field.
dcpv_dtype claim_format(const json& j, const char* key) {
  const std::string f = j.value(key, std::string("f32"));
  return f == "f32" ? DCPV_F32 : f == "bf16" ? DCPV_BF16 : f == "f16" ? DCPV_F16 : DCPV_I64;
}

// The file descriptor the environment variable `name` holds; -1 where it is unset or not one.
int env_fd(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return -1;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return end == text || *end != '\0' || v < 0 || v > INT_MAX ? -1 : static_cast<int>(v);
}

// Maps the shared region DCPV_BRIDGE_SHM_FD names, where it does (else payloads use the socket).
void map_shared_region() {
  const int fd = env_fd("DCPV_BRIDGE_SHM_FD");
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size <= 0) return;
  void* p =
      ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return;
  g_conn.shm = static_cast<char*>(p);
  g_conn.shm_bytes = static_cast<size_t>(st.st_size);
  g_conn.regions = dcp::bridge::RegionRing(g_conn.shm_bytes);
}

// The features the server says its implementation lacks (DCPV_LACKS_*), by --without's names.
uint32_t lacks_of(const json& names) {
  constexpr const char* kNames[] = DCPV_LACKS_NAMES;  // bit i, name i
  uint32_t out = 0;
  for (const json& n : names)
    for (size_t i = 0; i < std::size(kNames); ++i)
      if (n.is_string() && n.get<std::string>() == kNames[i]) out |= 1u << i;
  return out;
}

}  // namespace

static const dcpv_impl_v2* get_impl() {
  static std::mutex hello;  // the first call says hello; the others wait for it
  const std::lock_guard<std::mutex> lock(hello);
  if (g_impl.abi_version == DCPV_ABI_VERSION_4) return &g_impl;
  g_conn.fd = env_fd("DCPV_BRIDGE_FD");
  if (g_conn.fd < 0) return nullptr;
  if (g_conn.shm == nullptr) map_shared_region();
  json reply;
  std::vector<char> rp;
  std::string why;
  if (!exchange({{"op", "hello"}, {"abi", DCPV_ABI_VERSION_4}}, Request{}, 0, reply, rp, why))
    return nullptr;
  g_conn.name = reply.value("name", std::string());
  const json levels = reply.value("levels", json::array());
  const auto provides = [&](const char* level) {
    for (const json& l : levels)
      if (l.is_string() && l.get<std::string>() == level) return true;
    return false;
  };
  const json c = reply.value("claim", json::object());
  g_impl.abi_version = DCPV_ABI_VERSION_4;
  g_impl.name = g_conn.name.c_str();
  g_impl.claim.accum_rounding_nearest = c.value("accum_rounding_nearest", 1);
  g_impl.claim.tf32 = c.value("tf32", 0);
  g_impl.claim.ftz = c.value("ftz", 0);
  g_impl.claim.exp_rel_err = c.value("exp_rel_err", 0.0);
  g_impl.claim.log_rel_err = c.value("log_rel_err", 0.0);
  g_impl.claim.p_cast = claim_format(c, "p_cast");
  g_impl.claim.tile = c.value("tile", int64_t{1});
  g_impl.claim.splits = c.value("splits", int64_t{1});
  g_impl.claim.partial_o = claim_format(c, "partial_o");
  g_impl.claim.combine_accum = claim_format(c, "combine_accum");
  g_impl.partial = provides("partial") ? bridge_partial : nullptr;
  g_impl.combine = provides("combine") ? bridge_combine : nullptr;
  g_impl.step = provides("step") ? bridge_step : nullptr;
  g_impl.paged = provides("paged") ? bridge_paged : nullptr;
  // An unknown format or layout reaches load_plugin's checks, which name the field.
  g_impl.kv_dequant = claim_format(reply, "kv_dequant");
  // A server that does not say it speaks version 3 (4) lacks what version 3 (4) added.
  g_impl.lacks = lacks_of(reply.value("lacks", json::array()));
  const int64_t speaks = reply.contains("abi") && reply["abi"].is_number_integer()
                             ? reply["abi"].get<int64_t>()
                             : DCPV_ABI_VERSION_2;
  if (speaks < DCPV_ABI_VERSION_3) g_impl.lacks |= DCPV_LACKS_ALIBI | DCPV_LACKS_TOKEN_SCALES;
  if (speaks < DCPV_ABI_VERSION_4) g_impl.lacks |= DCPV_LACKS_PAGE_SCALES;
  const std::string layout = reply.value("page_layout", std::string("NHD"));
  g_impl.page_layout = layout == "NHD" ? DCPV_PAGES_NHD : layout == "HND" ? DCPV_PAGES_HND : -1;
  return &g_impl;
}

extern "C" DCPV_EXPORT const dcpv_impl_v2* dcpv_get_impl_v2(void) {
  try {
    return get_impl();
  } catch (...) {  // a hello reply of the wrong types: no implementation
    return nullptr;
  }
}
