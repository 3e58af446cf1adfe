#include "tools/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>

namespace attnpool_tools {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

struct InputFile {
  dev_t device;
  ino_t inode;
  std::string label;
};
std::mutex inputs_mutex;
std::vector<InputFile>& Inputs() {
  static std::vector<InputFile> inputs;
  return inputs;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string BaseOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What an output's path names, symbolic links followed (a dangling link
// names the file it would create).
struct Target {
  enum Kind { created, replaced, in_place } kind = created;
  std::string path;  // links resolved: where the bytes go
  struct stat status = {};  // replaced, in_place: the file's
  // The file's device and inode, or (created) its directory's and its name.
  dev_t device = 0;
  ino_t inode = 0;
  std::string name;

  bool SameFile(const Target& other) const {
    return device == other.device && inode == other.inode &&
           name == other.name;
  }
};

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The target of `file`, checked as output_files.h says; throws OutputError.
Target Resolve(const OutputFile& file) {
  const std::string prefix = file.label + " " + file.path + ": ";
  const auto fail = [&](const std::string& why) -> Target {
    throw OutputError(prefix + why);
  };
  if (file.path.empty()) fail("is an empty path");
  Target target;
  target.path = file.path;
  for (int links = 0;; ++links) {
    if (::lstat(target.path.c_str(), &target.status) != 0) {
      if (errno != ENOENT) return fail("cannot create: " + ErrnoText());
      // A new file: its directory must take it.
      const std::string directory = DirectoryOf(target.path);
      struct stat status;
      if (::stat(directory.c_str(), &status) != 0) {
        return fail("cannot create: " + ErrnoText());
      }
      if (!S_ISDIR(status.st_mode)) {
        return fail("cannot create: " + directory + " is not a directory");
      }
      if (::access(directory.c_str(), W_OK | X_OK) != 0) {
        return fail("cannot create: " + ErrnoText());
      }
      target.kind = Target::created;
      target.device = status.st_dev;
      target.inode = status.st_ino;
      target.name = BaseOf(target.path);
      return target;
    }
    if (!S_ISLNK(target.status.st_mode)) break;
    if (links == 40) return fail("has too many levels of symbolic links");
    std::vector<char> buffer(size_t(target.status.st_size) + 2);
    const ssize_t length =
        ::readlink(target.path.c_str(), buffer.data(), buffer.size());
    if (length < 0 || size_t(length) >= buffer.size()) {
      return fail("cannot read the link: " + ErrnoText());
    }
    const std::string link(buffer.data(), size_t(length));
    target.path =
        link[0] == '/' ? link : DirectoryOf(target.path) + "/" + link;
  }
  const mode_t mode = target.status.st_mode;
  target.device = target.status.st_dev;
  target.inode = target.status.st_ino;
  if (S_ISDIR(mode)) return fail("is a directory");
  if (S_ISREG(mode)) {
    target.kind = Target::replaced;
    if ((mode & 0222) == 0) {
      return fail("is read-only (mode " + ModeText(mode) +
                  "): make it writable or write elsewhere");
    }
  } else if (S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode)) {
    target.kind = Target::in_place;
  } else {
    return fail("is not a file, a device or a FIFO");
  }
  if (::access(target.path.c_str(), W_OK) != 0) {
    return fail("cannot write: " + ErrnoText());
  }
  return target;
}

std::vector<Target> ResolveAll(const std::vector<OutputFile>& files) {
  std::vector<Target> targets;
  std::vector<InputFile> inputs;
  {
    std::lock_guard<std::mutex> lock(inputs_mutex);
    inputs = Inputs();
  }
  for (size_t k = 0; k < files.size(); ++k) {
    Target target = Resolve(files[k]);
    const std::string prefix = files[k].label + " " + files[k].path + ": ";
    for (const InputFile& input : inputs) {
      if (target.name.empty() && input.device == target.device &&
          input.inode == target.inode) {
        throw OutputError(prefix + "is the file of the input " + input.label +
                          ": write the result elsewhere");
      }
    }
    for (size_t j = 0; j < k; ++j) {
      if (target.SameFile(targets[j])) {
        throw OutputError(prefix + "is also " + files[j].label + "'s file (" +
                          files[j].path + ")");
      }
    }
    targets.push_back(std::move(target));
  }
  return targets;
}

// A new file beside `path`, path + ".tmp" + a random suffix, opened for
// writing and its name in `name`: created exclusively (never an existing
// file, nor a link planted under a name it could take), with the
// permissions a new file gets from the umask.
int CreateTemporary(const std::string& path, std::string* name) {
  std::random_device entropy;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", entropy(), entropy());
    *name = path + ".tmp" + suffix;
    const int fd =
        ::open(name->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

// Writes `file` through `fd` (closed on return); fsync for regular files.
bool WriteThrough(int fd, const OutputFile& file, bool sync) {
  std::FILE* stream = ::fdopen(fd, "wb");
  if (stream == nullptr) {
    ::close(fd);
    return false;
  }
  bool ok = file.write(stream) && std::fflush(stream) == 0;
  if (ok && sync && ::fsync(fd) != 0) ok = false;
  const int saved = errno;
  if (std::fclose(stream) != 0 && ok) return false;
  errno = saved;
  return ok;
}

void SyncDirectory(const std::string& path) {
  const int fd = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);  // (best effort: the renames are done)
    ::close(fd);
  }
}

}  // namespace

void RememberInput(const std::string& path, const std::string& label) {
  struct stat status;
  if (::stat(path.c_str(), &status) != 0) return;
  std::lock_guard<std::mutex> lock(inputs_mutex);
  Inputs().push_back({status.st_dev, status.st_ino, label});
}

void CheckOutputs(const std::vector<OutputFile>& files) { ResolveAll(files); }

void CommitOutputs(const std::vector<OutputFile>& files) {
  const std::vector<Target> targets = ResolveAll(files);
  std::vector<std::string> temporaries(files.size());
  const auto remove_temporaries = [&] {
    for (const std::string& name : temporaries) {
      if (!name.empty()) ::unlink(name.c_str());
    }
  };
  const auto fail = [&](size_t k, const std::string& what) {
    const std::string reason = ErrnoText();
    remove_temporaries();
    throw OutputError(files[k].label + " " + files[k].path + ": " + what +
                      reason);
  };
  // 1. Every staged file written in full.
  for (size_t k = 0; k < files.size(); ++k) {
    const Target& target = targets[k];
    if (target.kind == Target::in_place) continue;
    const int fd = CreateTemporary(target.path, &temporaries[k]);
    if (fd < 0) {
      temporaries[k].clear();
      fail(k, "cannot create a temporary file beside it: ");
    }
    if (target.kind == Target::replaced) {
      // The replaced file's permissions (and owner, where we may set it).
      if (::geteuid() == 0) {
        if (::fchown(fd, target.status.st_uid, target.status.st_gid) != 0) {
          // (kept ours: the mode below still holds)
        }
      }
      if (::fchmod(fd, target.status.st_mode & 07777) != 0) {
        ::close(fd);
        fail(k, "cannot set the mode: ");
      }
    }
    if (!WriteThrough(fd, files[k], true)) fail(k, "cannot write: ");
  }
  // 2. Devices and FIFOs, in place.
  for (size_t k = 0; k < files.size(); ++k) {
    if (targets[k].kind != Target::in_place) continue;
    const int fd = ::open(targets[k].path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail(k, "cannot open: ");
    if (!WriteThrough(fd, files[k], false)) fail(k, "cannot write: ");
  }
  // 3. The renames; a replaced file is kept under a second name (a hard
  // link) until every rename is done, to be put back if one fails.
  std::vector<std::string> kept(files.size());
  for (size_t k = 0; k < files.size(); ++k) {
    const Target& target = targets[k];
    if (target.kind == Target::in_place) continue;
    if (target.kind == Target::replaced) {
      std::string name;
      const int fd = CreateTemporary(target.path + ".old", &name);
      if (fd >= 0) {
        ::close(fd);
        ::unlink(name.c_str());
        if (::link(target.path.c_str(), name.c_str()) == 0) kept[k] = name;
      }
    }
    if (::rename(temporaries[k].c_str(), target.path.c_str()) != 0) {
      const int saved = errno;
      for (size_t j = 0; j < k; ++j) {  // put back what was renamed
        if (targets[j].kind == Target::in_place) continue;
        if (!kept[j].empty()) {
          ::rename(kept[j].c_str(), targets[j].path.c_str());
        } else if (targets[j].kind == Target::created) {
          ::unlink(targets[j].path.c_str());
        }
        temporaries[j].clear();
      }
      if (!kept[k].empty()) ::unlink(kept[k].c_str());
      errno = saved;
      fail(k, "cannot replace it: ");
    }
  }
  for (size_t k = 0; k < files.size(); ++k) {
    if (!kept[k].empty()) ::unlink(kept[k].c_str());
    if (targets[k].kind != Target::in_place) SyncDirectory(targets[k].path);
  }
}

}  // namespace attnpool_tools
