// Output files of the tools, written all or none (docs/design.md §5).
//
// Every output is checked before anything is computed or written: it may not
// be a directory or a socket, nor a read-only file (no write bit: refused as
// root too, where numpy.save would overwrite it), nor a file the tool read
// (an input: compared by device and inode, so every spelling, hard link and
// symbolic link of it counts), nor the same file as another output. Then
// CommitOutputs writes them:
//   - a regular file (or a new one) through a temporary file in its
//     directory, created exclusively, flushed to disk, given the replaced
//     file's mode (and, as root, its owner), then renamed over it;
//   - a symbolic link's target likewise, the link left as it is;
//   - a device or a FIFO in place (it cannot be replaced by a file:
//     `-o /dev/null` stays the device);
// first every temporary file, then every in-place file, then the renames:
// a failure before the renames leaves every output as it was, and a rename
// that fails puts back those renamed before it.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnpool_tools {

// A refused or failed output: the message starts with its label and path.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Records that the tool has read the file at `path` as input `label`
// ("--keys x.npy"): no output may be that file.
void RememberInput(const std::string& path, const std::string& label);

// Writes an output's bytes; false on failure, errno saying why.
using OutputWriter = std::function<bool(std::FILE*)>;

struct OutputFile {
  std::string label;  // the option ("-o", "--weights") or the file's role
  std::string path;
  OutputWriter write;
};

// Refuses (OutputError) an output that cannot be written as the header says,
// before any work: call it once the inputs are read.
void CheckOutputs(const std::vector<OutputFile>& files);

// CheckOutputs, then every file written, or none (the header's order).
void CommitOutputs(const std::vector<OutputFile>& files);

}  // namespace attnpool_tools
