// How the ranks of a collective call agree before they communicate
// (include/attnpool/mpi.h): on the arguments that must be the same
// everywhere, and on whether every rank's own part succeeded. Each is one
// collective that every rank reaches, so an error on one rank becomes an
// error on every rank instead of a hang in the next collective.
#pragma once

#include <attnpool/mpi.h>
#include <mpi.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnpool {
namespace mpi {
namespace detail {

// Arguments that must be equal on every rank, as (name, value) pairs in
// the same order on every rank; a list's size before its elements.
class SameEverywhere {
 public:
  SameEverywhere& add(const char* argument, int64_t value) {
    arguments_.push_back({argument, value, false, true});
    return *this;
  }
  // A floating-point value: compared by its bits (±0 as +0), named as the
  // number it is.
  SameEverywhere& add_number(const char* argument, double value);
  // An argument that only the ranks where `applies` holds must agree on
  // (e.g. the valid lengths of ranks that have queries); the others add it
  // too, to keep the order.
  SameEverywhere& add_where(bool applies, const char* argument, int64_t value) {
    arguments_.push_back({argument, value, false, applies});
    return *this;
  }
  // Throws attnpool::Error(argument, "differs across ranks: …") on every
  // rank, for the first argument whose values differ, naming two ranks and
  // their values.
  void Check(MPI_Comm comm) const;

 private:
  struct Argument {
    const char* name;
    int64_t value;  // a number's bits where `number`
    bool number, applies;
  };
  std::vector<Argument> arguments_;
};

// The first failure of a collective step: the lowest failing rank and the
// texts that describe its failure.
using Failure = RankFailure;
// Agrees on whether any rank failed (`failed`; `texts` describe this
// rank's failure, the same number of them on every rank): the first
// failure, on every rank, or none.
std::optional<Failure> FirstFailure(MPI_Comm comm, bool failed,
                                    std::vector<std::string> texts);

// Agrees on whether any rank failed (`failure` set): when one did, every
// rank throws, as Collectively says.
void ShareFailure(MPI_Comm comm, std::exception_ptr failure);

// Runs `local` (the rank's own checks or work, which may throw) and then
// agrees: when any rank threw, every rank throws — the lowest failing rank
// its message as an attnpool::Error with the same argument() on the others
// ("on rank r: …"), and a failing rank its own exception.
template <typename Local>
void Collectively(MPI_Comm comm, Local&& local) {
  std::exception_ptr failure;
  try {
    local();
  } catch (...) {
    failure = std::current_exception();
  }
  ShareFailure(comm, failure);
}

// The sum of `value` over the ranks below this one (MPI_Exscan; 0 on rank
// 0), and the sum over all ranks.
std::pair<uint64_t, uint64_t> OffsetAndTotal(MPI_Comm comm, uint64_t value);

int Rank(MPI_Comm comm);
int Size(MPI_Comm comm);

// A duplicate of the caller's communicator for the length of one call, so
// that the call's point-to-point messages never match the caller's own
// receives (whatever their tags). Collective.
class PrivateComm {
 public:
  explicit PrivateComm(MPI_Comm comm) { MPI_Comm_dup(comm, &comm_); }
  ~PrivateComm() { MPI_Comm_free(&comm_); }
  PrivateComm(const PrivateComm&) = delete;
  PrivateComm& operator=(const PrivateComm&) = delete;
  operator MPI_Comm() const { return comm_; }  // NOLINT

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
