#include "src/mpi/agreement.h"

#include <attnpool/error.h>

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <exception>
#include <string>

namespace attnpool {
namespace mpi {
namespace detail {

int Rank(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

int Size(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return size;
}

SameEverywhere& SameEverywhere::add_number(const char* argument, double value) {
  if (value == 0) value = 0;  // (−0 means what +0 does)
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  arguments_.push_back({argument, bits, true, true});
  return *this;
}

void SameEverywhere::Check(MPI_Comm comm) const {
  // The ranks compare the entries they all have: a list whose length
  // differs differs first in its size, added before its elements.
  int count = static_cast<int>(arguments_.size());
  int most = count;
  MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT, MPI_MAX, comm);
  // Per argument: the least and the greatest value of the ranks it applies
  // to (none: least > greatest).
  std::vector<int64_t> least(count), greatest(count);
  for (int a = 0; a < count; ++a) {
    const Argument& argument = arguments_[a];
    least[a] =
        argument.applies ? argument.value : std::numeric_limits<int64_t>::max();
    greatest[a] =
        argument.applies ? argument.value : std::numeric_limits<int64_t>::min();
  }
  MPI_Allreduce(MPI_IN_PLACE, least.data(), count, MPI_INT64_T, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, greatest.data(), count, MPI_INT64_T, MPI_MAX,
                comm);
  const auto text = [&](int a, int64_t value) {
    if (!arguments_[a].number) return std::to_string(value);
    double number;
    std::memcpy(&number, &value, sizeof(number));
    std::ostringstream out;
    out << std::setprecision(17) << number;
    return out.str();
  };
  for (int a = 0; a < count; ++a) {
    if (least[a] >= greatest[a]) continue;
    // The lowest ranks holding the least and the greatest value.
    const Argument& argument = arguments_[a];
    const int rank = Rank(comm), nobody = Size(comm);
    int ranks[2] = {
        argument.applies && argument.value == least[a] ? rank : nobody,
        argument.applies && argument.value == greatest[a] ? rank : nobody};
    MPI_Allreduce(MPI_IN_PLACE, ranks, 2, MPI_INT, MPI_MIN, comm);
    throw Error(argument.name, "differs across ranks: " + text(a, least[a]) +
                                   " on rank " + std::to_string(ranks[0]) +
                                   ", " + text(a, greatest[a]) + " on rank " +
                                   std::to_string(ranks[1]));
  }
  if (count != most) {  // a caller that adds a list without its size
    throw Error("arguments", "differ across ranks in number");
  }
}

namespace {

// The argument and message of an attnpool::Error ("attnpool: argument:
// message"), or ("", what()) of another exception.
std::pair<std::string, std::string> Describe(std::exception_ptr failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const Error& error) {
    const std::string prefix = "attnpool: " + error.argument() + ": ";
    std::string message = error.what();
    if (message.compare(0, prefix.size(), prefix) == 0) {
      message.erase(0, prefix.size());
    }
    return {error.argument(), message};
  } catch (const std::exception& error) {
    return {"", error.what()};
  } catch (...) {
    return {"", "an unknown exception"};
  }
}

}  // namespace

std::optional<Failure> FirstFailure(MPI_Comm comm, bool failed,
                                    std::vector<std::string> texts) {
  const int rank = Rank(comm), size = Size(comm);
  int first = failed ? rank : size;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return std::nullopt;
  for (std::string& text : texts) {
    int length = static_cast<int>(text.size());
    MPI_Bcast(&length, 1, MPI_INT, first, comm);
    text.resize(length);
    MPI_Bcast(&text[0], length, MPI_CHAR, first, comm);
  }
  return Failure{first, std::move(texts)};
}

void ShareFailure(MPI_Comm comm, std::exception_ptr failure) {
  std::vector<std::string> texts(2);
  if (failure) {
    const auto described = Describe(failure);
    texts = {described.first, described.second};
  }
  const auto first = FirstFailure(comm, failure != nullptr, std::move(texts));
  if (!first) return;
  if (failure) std::rethrow_exception(failure);
  const std::string& argument = first->texts[0];
  throw Error(
      argument.empty() ? "rank " + std::to_string(first->rank) : argument,
      "on rank " + std::to_string(first->rank) + ": " + first->texts[1]);
}

std::pair<uint64_t, uint64_t> OffsetAndTotal(MPI_Comm comm, uint64_t value) {
  uint64_t offset = 0, total = 0;
  MPI_Exscan(&value, &offset, 1, MPI_UINT64_T, MPI_SUM, comm);
  if (Rank(comm) == 0) offset = 0;  // MPI_Exscan leaves rank 0's undefined
  MPI_Allreduce(&value, &total, 1, MPI_UINT64_T, MPI_SUM, comm);
  return {offset, total};
}

}  // namespace detail

std::optional<RankFailure> first_failure(MPI_Comm comm, bool failed,
                                         std::vector<std::string> texts) {
  return detail::FirstFailure(comm, failed, std::move(texts));
}

}  // namespace mpi
}  // namespace attnpool
