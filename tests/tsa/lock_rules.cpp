// Lock rules the thread-safety analysis must enforce, one case per TSA_CASE value.
// scripts/tsa-check compiles every case with clang++ -Wthread-safety -Werror and requires the
// `reject_*` cases to fail with a thread-safety diagnostic and the `accept_*` cases to compile:
// proof that the annotations in etlc/detail/ are live, not decoration. Not linked into anything.
#include "driver/slot.hpp"
#include "etlc/detail/mutex.hpp"

namespace {

struct Account {
  etlc::Mutex mu;
  long balance ETLC_GUARDED_BY(mu) = 0;

  void add_locked(long amount) ETLC_REQUIRES(mu) { balance += amount; }
};

// The driver's shape: its mutex guards its own fields and every slot's control flags.
struct Driver {
  etlc::Mutex mu;
  int lost_count ETLC_GUARDED_BY(mu) = 0;
};

}  // namespace

#if TSA_CASE == 1  // reject_unguarded_write: a GUARDED_BY field written without its lock
void run(Account& a) {
  a.balance += 1;
}
#elif TSA_CASE == 2  // accept_guarded_write: the same write with the lock held
void run(Account& a) {
  etlc::MutexLock lk(a.mu);
  a.balance += 1;
}
#elif TSA_CASE == 3  // reject_requires_unheld: a REQUIRES function called without the lock
void run(Account& a) {
  a.add_locked(1);
}
#elif TSA_CASE == 4  // reject_write_after_scope: the lock's scope ended before the write
void run(Account& a) {
  {
    etlc::MutexLock lk(a.mu);
    a.add_locked(1);
  }
  a.balance = 0;
}
#elif TSA_CASE == 5  // reject_slot_flag_without_flags_held: the driver's lock alone is not enough
void run(Driver& d, etlc::driver::Slot& s) {
  etlc::MutexLock lk(d.mu);
  ++d.lost_count;
  s.lost = true;
}
#elif TSA_CASE == 6  // accept_slot_flag_with_flags_held
void run(Driver& d, etlc::driver::Slot& s) {
  etlc::MutexLock lk(d.mu);
  etlc::driver::FlagsHeld flags(s, etlc::held(d.mu));
  ++d.lost_count;
  s.lost = true;
}
#elif TSA_CASE == 7  // reject_flags_held_without_lock: FlagsHeld needs the driver's lock held
void run(Driver& d, etlc::driver::Slot& s) {
  etlc::driver::FlagsHeld flags(s, etlc::held(d.mu));
  s.lost = true;
}
#elif TSA_CASE == 8  // reject_slot_flag_after_flags_scope
void run(Driver& d, etlc::driver::Slot& s) {
  etlc::MutexLock lk(d.mu);
  {
    etlc::driver::FlagsHeld flags(s, etlc::held(d.mu));
    s.drain = true;
  }
  s.lost = true;
}
#else
#error "TSA_CASE must name a case of this file (see scripts/tsa-check)"
#endif
