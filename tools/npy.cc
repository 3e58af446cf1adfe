// NumPy .npy reading and writing (see npy.h for the accepted format).
#include "tools/npy.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>

namespace attnpool_tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// numpy itself refuses headers over 10 kB unless asked; anything this long
// is not an array header.
constexpr size_t kMaxHeaderSize = size_t{1} << 20;

struct TypeInfo {
  NpyType type;
  const char* name;
  const char* descr;
  size_t size;
};

constexpr TypeInfo kTypes[] = {
    {NpyType::float32, "float32", "<f4", 4},
    {NpyType::float64, "float64", "<f8", 8},
    {NpyType::int32, "int32", "<i4", 4},
    {NpyType::int64, "int64", "<i8", 8},
    {NpyType::uint32, "uint32", "<u4", 4},
    {NpyType::uint64, "uint64", "<u8", 8},
    {NpyType::bool8, "bool", "|b1", 1},
    {NpyType::uint8, "uint8", "|u1", 1},
    {NpyType::float16, "float16", "<f2", 2},
    {NpyType::uint16, "uint16", "<u2", 2},
    {NpyType::int8, "int8", "|i1", 1},
};

const TypeInfo& Info(NpyType type) {
  for (const auto& info : kTypes)
    if (info.type == type) return info;
  throw NpyError("invalid NpyType");
}

bool HostIsLittleEndian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

// A recursive-descent reader of the one Python literal numpy writes: a dict
// of string keys to a string, a bool, or a tuple of integers.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : text_(text) {}

  void Parse(NpyType* type, std::vector<size_t>* shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    std::string descr;
    bool fortran_order = false;
    List('{', '}', "", [&] {
      const std::string key = String();
      Expect(':');
      if (key == "descr") {
        SkipSpace();
        if (Peek() != '\'' && Peek() != '"') {
          Fail(
              "'descr' is not a plain dtype string (structured or object "
              "arrays are not supported)");
        }
        descr = String();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran_order = Bool();
        have_order = true;
      } else if (key == "shape") {
        *shape = Tuple();
        have_shape = true;
      } else {
        Fail("unexpected key '" + Printable(key) + "'");
      }
    });
    SkipSpace();
    if (pos_ != text_.size()) Fail("text after the closing '}'");
    if (!have_descr || !have_order || !have_shape) {
      throw NpyError(
          "malformed header: it must have the keys 'descr', 'fortran_order' "
          "and 'shape'");
    }
    if (fortran_order) {
      throw NpyError(
          "the array is in Fortran order (column-major); attnpool reads "
          "C-order arrays: save np.ascontiguousarray(a) instead");
    }
    *type = TypeFromDescr(descr);
  }

 private:
  static NpyType TypeFromDescr(const std::string& descr) {
    for (const auto& info : kTypes) {
      if (descr == info.descr) return info.type;
    }
    // numpy writes '|' or '=' for byte-order-less types on some platforms.
    if (descr == "<b1" || descr == "=b1" || descr == ">b1")
      return NpyType::bool8;
    if (descr == "<u1" || descr == "=u1" || descr == ">u1")
      return NpyType::uint8;
    if (descr == "<i1" || descr == "=i1" || descr == ">i1")
      return NpyType::int8;
    if (descr.size() == 3 && descr[0] == '>') {
      throw NpyError("dtype '" + descr + "' is big-endian; save a.astype('<" +
                     descr.substr(1) + "') instead");
    }
    throw NpyError("dtype '" + Printable(descr) +
                   "' is not supported: use float32 ('<f4') or float64 "
                   "('<f8') (e.g. a.astype(np.float32))");
  }

  [[noreturn]] void Fail(const std::string& what) const {
    throw NpyError("malformed header: " + what + " at offset " +
                   std::to_string(pos_) + " of \"" + Printable() + "\"");
  }

  // `text` as it may be printed: at most 120 characters, each other than
  // a printable ASCII one shown as '?'.
  static std::string Printable(const std::string& text) {
    std::string shown;
    for (char c : text.substr(0, 120)) {
      shown += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    }
    return text.size() > 120 ? shown + "..." : shown;
  }
  std::string Printable() const { return Printable(text_); }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void Expect(char c) {
    SkipSpace();
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  // Reads `open`, then calls `item()` on each entry of a comma-separated
  // list (a trailing comma allowed) up to `close`, which it reads; `where`
  // ends the message of a missing separator.
  template <class Item>
  void List(char open, char close, const char* where, const Item& item) {
    Expect(open);
    while (true) {
      SkipSpace();
      if (Peek() == close) break;
      item();
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() != close) {
        Fail(std::string("expected ',' or '") + close + "'" + where);
      }
    }
    ++pos_;
  }

  std::string String() {
    SkipSpace();
    const char quote = Peek();
    if (quote != '\'' && quote != '"') Fail("expected a quoted string");
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string::npos) Fail("unterminated string");
    std::string value = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return value;
  }

  bool Bool() {
    SkipSpace();
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    Fail("expected True or False");
  }

  std::vector<size_t> Tuple() {
    std::vector<size_t> values;
    List('(', ')', " in the shape", [&] {
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) {
        Fail("expected a non-negative integer in the shape");
      }
      size_t value = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) {
        const size_t digit = static_cast<size_t>(text_[pos_++] - '0');
        if (__builtin_mul_overflow(value, size_t{10}, &value) ||
            __builtin_add_overflow(value, digit, &value)) {
          Fail("shape entry too large");
        }
      }
      if (Peek() == 'L') ++pos_;  // Python 2 longs
      values.push_back(value);
    });
    return values;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

std::string ErrnoText() { return std::strerror(errno); }

struct FileCloser {
  void operator()(std::FILE* file) const {
    if (file) std::fclose(file);
  }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::shared_ptr<unsigned char> Allocate(size_t bytes) {
  // malloc: aligned for every element type, and no constructor to run.
  void* memory = std::malloc(bytes == 0 ? 1 : bytes);
  if (memory == nullptr) {
    throw NpyError("cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return std::shared_ptr<unsigned char>(static_cast<unsigned char*>(memory),
                                        [](unsigned char* p) { std::free(p); });
}

size_t CountOf(const std::vector<size_t>& shape, size_t element_size,
               size_t* bytes) {
  size_t count = 1;
  for (size_t extent : shape) {
    if (__builtin_mul_overflow(count, extent, &count)) {
      throw NpyError("shape " + ShapeText(shape) +
                     " overflows the address space");
    }
  }
  if (__builtin_mul_overflow(count, element_size, bytes)) {
    throw NpyError("shape " + ShapeText(shape) +
                   " overflows the address space");
  }
  return count;
}

}  // namespace

const char* NpyTypeName(NpyType type) { return Info(type).name; }
size_t NpyTypeSize(NpyType type) { return Info(type).size; }
const char* NpyDescr(NpyType type) { return Info(type).descr; }

std::string ShapeText(const std::vector<size_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

void ParseNpyHeader(const std::string& header, NpyType* type,
                    std::vector<size_t>* shape) {
  HeaderParser(header).Parse(type, shape);
}

NpyArray MakeNpyArray(NpyType type, const std::vector<size_t>& shape) {
  NpyArray array;
  array.type = type;
  array.shape = shape;
  size_t bytes = 0;
  array.count = CountOf(shape, NpyTypeSize(type), &bytes);
  array.storage = Allocate(bytes);
  return array;
}

namespace {

struct NpyHeader {
  NpyType type;
  std::vector<size_t> shape;
  size_t data_offset;  // bytes before the data
};

// Reads and parses the header through `read(buffer, bytes)`, which returns
// how many of the next `bytes` bytes of the file it read: exactly the
// header's bytes, no more.
template <class Read>
NpyHeader ReadHeader(const Read& read) {
  if (!HostIsLittleEndian()) {
    throw NpyError(
        "this tool reads little-endian arrays on little-endian "
        "machines only");
  }
  unsigned char prefix[kMagicSize + 2];
  const size_t got = read(prefix, sizeof(prefix));
  if (got < kMagicSize || std::memcmp(prefix, kMagic, kMagicSize) != 0) {
    throw NpyError(
        "not a .npy file (it does not start with \\x93NUMPY; "
        "write it with numpy.save)");
  }
  if (got < sizeof(prefix)) throw NpyError("truncated header (no version)");
  const int major = prefix[kMagicSize], minor = prefix[kMagicSize + 1];
  size_t length_size = 0;
  if (major == 1 && minor == 0) {
    length_size = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    length_size = 4;
  } else {
    throw NpyError("unsupported .npy format version " + std::to_string(major) +
                   "." + std::to_string(minor) + " (known: 1.0, 2.0, 3.0)");
  }
  unsigned char length_bytes[4] = {0, 0, 0, 0};
  if (read(length_bytes, length_size) != length_size) {
    throw NpyError("truncated header (no header length)");
  }
  size_t header_length = 0;
  for (size_t i = length_size; i-- > 0;) {
    header_length = (header_length << 8) | length_bytes[i];
  }
  if (header_length > kMaxHeaderSize) {
    throw NpyError("malformed header: its length field says " +
                   std::to_string(header_length) + " bytes");
  }
  std::string header(header_length, '\0');
  if (read(&header[0], header_length) != header_length) {
    throw NpyError("truncated header (the file ends inside the " +
                   std::to_string(header_length) + "-byte header)");
  }
  if (header.empty() || header.back() != '\n') {
    throw NpyError("malformed header: it does not end with a newline");
  }
  NpyHeader parsed;
  ParseNpyHeader(header, &parsed.type, &parsed.shape);
  parsed.data_offset = sizeof(prefix) + length_size + header_length;
  return parsed;
}

NpyError TruncatedData(const NpyHeader& header, size_t needed, size_t has) {
  return NpyError("truncated data: shape " + ShapeText(header.shape) + " of " +
                  NpyTypeName(header.type) + " needs " +
                  std::to_string(needed) + " bytes, the file has " +
                  std::to_string(has));
}

NpyError TrailingData(const NpyHeader& header, size_t needed) {
  return NpyError("the file has data after the " + std::to_string(needed) +
                  " bytes that shape " + ShapeText(header.shape) + " of " +
                  NpyTypeName(header.type) +
                  " needs (several arrays in one file are not supported)");
}

}  // namespace

NpyArray ReadNpy(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw NpyError("cannot open: " + ErrnoText());
  const NpyHeader header = ReadHeader([&](void* buffer, size_t bytes) {
    return std::fread(buffer, 1, bytes, file.get());
  });
  // A regular file too short for its shape is reported before the
  // allocation of what it claims.
  size_t bytes = 0;
  CountOf(header.shape, NpyTypeSize(header.type), &bytes);
  struct stat status;
  const long position = std::ftell(file.get());
  if (fstat(fileno(file.get()), &status) == 0 && S_ISREG(status.st_mode) &&
      position >= 0 && static_cast<size_t>(status.st_size - position) < bytes) {
    throw TruncatedData(header, bytes, status.st_size - position);
  }
  NpyArray array = MakeNpyArray(header.type, header.shape);
  const size_t read = std::fread(array.storage.get(), 1, bytes, file.get());
  if (read != bytes) throw TruncatedData(header, bytes, read);
  if (std::fgetc(file.get()) != EOF) throw TrailingData(header, bytes);
  return array;
}

NpyArray ReadNpyRows(const std::string& path, size_t part, size_t parts,
                     NpyRowRange* range) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw NpyError("cannot open: " + ErrnoText());
  const std::unique_ptr<int, void (*)(int*)> closer(
      new int(fd), [](int* f) { ::close(*f), delete f; });
  off_t position = 0;
  const NpyHeader header = ReadHeader([&](void* buffer, size_t bytes) {
    const ssize_t got = ::pread(fd, buffer, bytes, position);
    if (got < 0) throw NpyError("cannot read: " + ErrnoText());
    position += got;
    return static_cast<size_t>(got);
  });
  if (header.shape.empty()) {
    throw NpyError("a 0-D array has no rows to split among processes");
  }
  size_t bytes = 0;
  const size_t count = CountOf(header.shape, NpyTypeSize(header.type), &bytes);
  struct stat status;
  if (::fstat(fd, &status) != 0) throw NpyError("cannot stat: " + ErrnoText());
  const size_t file_data = static_cast<size_t>(status.st_size) -
                           std::min<size_t>(status.st_size, header.data_offset);
  if (file_data < bytes) throw TruncatedData(header, bytes, file_data);
  if (file_data > bytes) throw TrailingData(header, bytes);

  const size_t rows = header.shape[0];
  const size_t row_bytes = rows == 0 ? 0 : bytes / rows;
  // Part p of P: rows [⌊rows·p/P⌋, ⌊rows·(p+1)/P⌋), in 128-bit arithmetic.
  const auto boundary = [&](size_t k) {
    return static_cast<size_t>((unsigned __int128)rows * k / parts);
  };
  range->first = boundary(part);
  range->total = rows;
  std::vector<size_t> shape = header.shape;
  shape[0] = boundary(part + 1) - range->first;
  NpyArray array;
  array.type = header.type;
  array.shape = shape;
  array.count = rows == 0 ? 0 : count / rows * shape[0];
  const size_t begin = header.data_offset + range->first * row_bytes;
  const size_t length = shape[0] * row_bytes;
  // Read, not mapped: a mapped file that shrinks while the run uses it
  // ends the process with SIGBUS; read data stays valid, and a file that
  // shrinks while it is read is an error here.
  array.storage = Allocate(length);
  size_t done = 0;
  while (done < length) {
    const ssize_t got = ::pread(fd, array.storage.get() + done, length - done,
                                static_cast<off_t>(begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw NpyError("cannot read: " + ErrnoText());
    if (got == 0) {
      throw NpyError("the file ended " + std::to_string(length - done) +
                     " bytes short of this part's rows (did it shrink "
                     "while being read?)");
    }
    done += static_cast<size_t>(got);
  }
  return array;
}

bool WriteNpyTo(std::FILE* stream, const NpyArray& array) {
  std::string header =
      std::string("{'descr': '") + NpyDescr(array.type) +
      "', 'fortran_order': False, 'shape': " + ShapeText(array.shape) + ", }";
  // Magic, version and length field, then the header padded with spaces so
  // that the data starts at a multiple of 64 bytes; '\n' last.
  size_t length_size = 2;
  size_t total = kMagicSize + 2 + length_size + header.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  if (padded - kMagicSize - 2 - length_size > 0xffff) {
    length_size = 4;
    total = kMagicSize + 2 + length_size + header.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  header.append(padded - total, ' ');
  header += '\n';
  std::string prefix(kMagic, kMagicSize);
  prefix += static_cast<char>(length_size == 2 ? 1 : 2);
  prefix += '\0';
  const size_t header_length = header.size();
  for (size_t i = 0; i < length_size; ++i) {
    prefix += static_cast<char>((header_length >> (8 * i)) & 0xff);
  }
  const size_t bytes = array.count * NpyTypeSize(array.type);
  return std::fwrite(prefix.data(), 1, prefix.size(), stream) ==
             prefix.size() &&
         std::fwrite(header.data(), 1, header.size(), stream) ==
             header.size() &&
         std::fwrite(array.storage.get(), 1, bytes, stream) == bytes;
}

OutputFile NpyOutput(const std::string& label, const std::string& path,
                     const NpyArray& array) {
  return {label, path,
          [&array](std::FILE* stream) { return WriteNpyTo(stream, array); }};
}

}  // namespace attnpool_tools
