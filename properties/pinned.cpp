#include "properties/pinned.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "oracle/text.hpp"

namespace dcp::props {

oracle::Expected<std::vector<PinnedEntry>> parse_pinned(std::string_view text,
                                                        const std::string& source) {
  const std::string where = "pinned counterexamples '" + oracle::printable(source) + "'";
  const nlohmann::json all = nlohmann::json::parse(text, nullptr, false);
  if (all.is_discarded()) return DCP_ERROR(where, ": not valid JSON");
  if (!all.is_array() || all.empty()) return DCP_ERROR(where, ": expected a non-empty JSON array");
  std::vector<PinnedEntry> out;
  for (size_t i = 0; i < all.size(); ++i) {
    const nlohmann::json& j = all[i];
    const std::string entry = where + ": entry " + std::to_string(i);
    if (!j.is_object()) return DCP_ERROR(entry, ": expected an object with 'why' and 'setup'");
    for (const auto& [key, value] : j.items())
      if (key != "why" && key != "setup")
        return DCP_ERROR(entry, ": ", oracle::printable(key), ": unknown field");
    if (!j.contains("why") || !j.at("why").is_string())
      return DCP_ERROR(entry, ": why: expected a string");
    if (!j.contains("setup")) return DCP_ERROR(entry, ": setup: missing");
    if (!j.at("setup").is_object()) return DCP_ERROR(entry, ": setup: expected an object");
    oracle::Expected<DcpSetup> s = setup_from_json(j.at("setup"));
    if (!s) return DCP_ERROR(entry, ": setup.", s.status().message());
    out.push_back({j.at("why").get<std::string>(), *s});
  }
  return out;
}

oracle::Expected<std::vector<PinnedEntry>> load_pinned(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec))
    return DCP_ERROR("pinned counterexamples '", path, "': a folder, expected a JSON file");
  const uintmax_t size = std::filesystem::file_size(p, ec);
  if (ec) return DCP_ERROR("pinned counterexamples '", path, "': cannot read: ", ec.message());
  if (size > kMaxPinnedFileBytes)
    return DCP_ERROR("pinned counterexamples '", path, "': ", size, " bytes; expected at most ",
                     kMaxPinnedFileBytes);
  if (size == 0)
    return DCP_ERROR("pinned counterexamples '", path,
                     "': an empty file; expected a non-empty JSON array");
  std::ifstream f(path, std::ios::binary);
  std::ostringstream text;
  if (!f || !(text << f.rdbuf()))
    return DCP_ERROR("pinned counterexamples '", path, "': cannot read");
  return parse_pinned(text.str(), path);
}

PinnedReplay replay_pinned(const std::vector<PinnedEntry>& entries, const DcpBackend& backend) {
  PinnedReplay out;
  for (const PinnedEntry& e : entries) {
    const DcpCheck chk = check_dcp_setup(e.setup, backend);
    if (!chk.pass) out.failures.push_back(e.why + " | " + describe(e.setup) + " | " + chk.report);
    ++out.count;
  }
  return out;
}

oracle::Expected<PinnedReplay> replay_pinned(const std::string& path, const DcpBackend& backend) {
  const auto entries = load_pinned(path);
  if (!entries) return entries.status();
  return replay_pinned(*entries, backend);
}

}  // namespace dcp::props
