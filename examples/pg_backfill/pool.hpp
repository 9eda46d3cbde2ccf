// Connections to one database, kept for reuse: a lane takes one when it opens and gives it back
// when it closes, so a member holds about one connection per lane per database however many
// splits pass through it. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pg.hpp"

namespace pgb {

class ConnPool {
 public:
  // `setup`: statements run on every new connection (SET ...). At most `max_idle` are kept.
  ConnPool(std::string url, std::string application_name, std::vector<std::string> setup = {},
           std::size_t max_idle = 16)
      : url_(std::move(url)),
        app_(std::move(application_name)),
        setup_(std::move(setup)),
        max_idle_(max_idle) {}

  // An idle connection or a new one. Throws PgError (connection_lost() if unreachable).
  std::unique_ptr<Connection> take() {
    {
      std::lock_guard lk(mu_);
      while (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        if (c->ok()) return c;
      }
    }
    return std::make_unique<Connection>(url_, app_, setup_);
  }
  // Back to the pool if still usable (never inside a transaction: callers end theirs).
  void give(std::unique_ptr<Connection> c) {
    if (!c || !c->ok()) return;
    std::lock_guard lk(mu_);
    if (idle_.size() < max_idle_) idle_.push_back(std::move(c));
  }
  const std::string& url() const { return url_; }

 private:
  std::string url_, app_;
  std::vector<std::string> setup_;
  std::size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace pgb
