#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

// Temporary files that name the process that made them,
// "<prefix>-<pid>-<rest>", so that a process cleaning up after a crash
// removes only files whose maker is gone, and only of the kinds it owns:
// several processes (a daemon, CLI runs, check-blobs) share data_dir/tmp.
namespace tributary {

// "<prefix>-<pid>-<n><suffix>", n unique within this process.
std::string temp_file_name(std::string_view prefix, std::string_view suffix);

// Removes the files in `dir` named "<prefix>-<pid>-..." for one of
// `prefixes` whose process no longer exists. Anything else is left alone.
// Returns how many it removed.
size_t remove_orphaned_temp_files(const std::filesystem::path& dir, std::initializer_list<std::string_view> prefixes);

} // namespace tributary
