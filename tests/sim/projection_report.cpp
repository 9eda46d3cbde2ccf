#include "projection_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace etlc::sim {

double PowerLaw::at(double members) const {
  return a * std::pow(members, b);
}

PowerLaw fit_power_law(const std::vector<double>& x, const std::vector<double>& y) {
  PowerLaw f;
  std::vector<std::pair<double, double>> pts;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i] > 0 && y[i] > 0) pts.emplace_back(std::log(x[i]), std::log(y[i]));
  }
  if (pts.size() < 2) return f;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [lx, ly] : pts) {
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  const double n = static_cast<double>(pts.size());
  const double den = n * sxx - sx * sx;
  if (den <= 0) return f;
  f.b = (n * sxy - sx * sy) / den;
  f.a = std::exp((sy - f.b * sx) / n);
  for (const auto& [lx, ly] : pts) f.residuals.push_back(std::exp(ly) / f.at(std::exp(lx)));
  f.ok = true;
  return f;
}

namespace {

using Get = std::function<double(const PhaseResult&)>;

struct Grid {
  std::map<std::pair<bool, int>, const ProjectionResult*> runs;
  std::set<int> sizes;
  std::vector<std::string> phases;

  // The measured value, or the fitted one (extrapolated = true), or nullopt.
  std::optional<double> value(bool targeted, int members, std::size_t phase, const Get& get,
                              bool& extrapolated) const {
    extrapolated = false;
    auto it = runs.find({targeted, members});
    if (it != runs.end()) return get(it->second->phases.at(phase));
    const PowerLaw f = fit(targeted, phase, get);
    if (!f.ok) return std::nullopt;
    extrapolated = true;
    return f.at(members);
  }
  PowerLaw fit(bool targeted, std::size_t phase, const Get& get) const {
    std::vector<double> x, y;
    for (const auto& [key, run] : runs) {
      if (key.first != targeted || phase >= run->phases.size()) continue;
      x.push_back(key.second);
      y.push_back(get(run->phases[phase]));
    }
    return fit_power_law(x, y);
  }
};

std::string num(double v) {
  if (v >= 1e7) return fmt::format("{:.3g}", v);
  if (v >= 100 || v == std::floor(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

std::string cell(const Grid& g, bool t, int m, std::size_t ph, const Get& get) {
  bool ex = false;
  const auto v = g.value(t, m, ph, get, ex);
  if (!v) return "n/a";
  return ex ? fmt::format("~{}*", num(*v)) : num(*v);
}

double role_value(const PhaseResult& p, Role r,
                  const std::function<double(const MemberPhase&)>& f) {
  const MemberPhase* m = member_with(p, r);
  return m ? f(*m) : 0;
}

double writes_of(const OpCounts& c) {
  return static_cast<double>(c.create + c.update + c.erase + c.create_many_requests);
}

struct Column {
  std::string title;
  std::vector<Get> parts;  // shown as a/b/c in one cell
};

std::vector<Column> phase_columns() {
  auto worker = [](std::function<std::uint64_t(const MemberPhase&)> f) {
    return std::vector<Get>{
        [f](const PhaseResult& p) { return static_cast<double>(worker_spread(p, f).min); },
        [f](const PhaseResult& p) { return static_cast<double>(worker_spread(p, f).median); },
        [f](const PhaseResult& p) { return static_cast<double>(worker_spread(p, f).max); }};
  };
  auto ops = [](const MemberPhase& m) { return m.ops.operations(); };
  auto deliv = [](const MemberPhase& m) { return m.ops.deliveries(); };
  auto role = [](Role r, std::function<std::uint64_t(const MemberPhase&)> f) {
    return [r, f](const PhaseResult& p) {
      return role_value(p, r, [&](const MemberPhase& m) { return static_cast<double>(f(m)); });
    };
  };
  return {
      {"virtual s", {[](const PhaseResult& p) { return p.virtual_s; }}},
      {"store calls", {[](const PhaseResult& p) { return double(p.total.operations()); }}},
      {"writes", {[](const PhaseResult& p) { return writes_of(p.total); }}},
      {"deliveries", {[](const PhaseResult& p) { return double(p.total.deliveries()); }}},
      {"leader calls / deliv.", {role(Role::leader, ops), role(Role::leader, deliv)}},
      {"standby calls / deliv.", {role(Role::standby, ops), role(Role::standby, deliv)}},
      {"worker calls min/med/max", worker(ops)},
      {"worker deliv. min/med/max", worker(deliv)},
  };
}

std::string table(const Grid& g, const std::vector<Column>& cols, std::size_t phase) {
  std::string out = "| members | targeted |";
  std::string rule = "|---|---|";
  for (const Column& c : cols) {
    out += fmt::format(" {} |", c.title);
    rule += "---|";
  }
  out += fmt::format("\n{}\n", rule);
  for (int m : g.sizes) {
    for (bool t : {false, true}) {
      out += fmt::format("| {} | {} |", m, t ? "on" : "off");
      for (const Column& c : cols) {
        std::string s;
        for (const Get& part : c.parts) {
          if (!s.empty()) s += " / ";
          s += cell(g, t, m, phase, part);
        }
        out += fmt::format(" {} |", s);
      }
      out += "\n";
    }
  }
  return out;
}

std::vector<Column> kind_columns() {
  auto k = [](std::string t, std::function<std::uint64_t(const OpCounts&)> f) {
    return Column{std::move(t), {[f](const PhaseResult& p) { return double(f(p.total)); }}};
  };
  return {
      k("get", [](const OpCounts& c) { return c.get; }),
      k("list", [](const OpCounts& c) { return c.list; }),
      k("create", [](const OpCounts& c) { return c.create; }),
      k("update", [](const OpCounts& c) { return c.update; }),
      k("erase", [](const OpCounts& c) { return c.erase; }),
      k("prefix watches", [](const OpCounts& c) { return c.watch_prefix; }),
      k("key watches", [](const OpCounts& c) { return c.watch_keys; }),
      k("create_many (requests)", [](const OpCounts& c) { return c.create_many_requests; }),
      k("deliv. member.*",
        [](const OpCounts& c) { return c.delivered[size_t(KeyFamily::member)]; }),
      k("deliv. lease.*", [](const OpCounts& c) { return c.delivered[size_t(KeyFamily::lease)]; }),
      k("deliv. assign.*",
        [](const OpCounts& c) { return c.delivered[size_t(KeyFamily::assign)]; }),
      k("deliv. split.*", [](const OpCounts& c) { return c.delivered[size_t(KeyFamily::split)]; }),
      k("deliv. job.*", [](const OpCounts& c) { return c.delivered[size_t(KeyFamily::job)]; })};
}

double sum_members(const PhaseResult& p, const std::function<double(const MemberPhase&)>& f) {
  double s = 0;
  for (const MemberPhase& m : p.members) s += f(m);
  return s;
}

std::vector<Column> limit_columns() {
  auto live = [](const MemberPhase& m) { return m.role == Role::crashed ? 0.0 : 1.0; };
  return {
      {"assignments", {[](const PhaseResult& p) { return double(p.assignments); }}},
      {"leader CPU ms / assignment (mean, max step)",
       {[](const PhaseResult& p) {
          return p.assignments ? 1e3 * p.assign_step_cpu_s / double(p.assignments) : 0.0;
        },
        [](const PhaseResult& p) { return 1e3 * p.assign_step_cpu_max_s; }}},
      {"leader CPU s (phase)", {[](const PhaseResult& p) { return p.leader_cpu_s; }}},
      {"leader view entries / MB",
       {[](const PhaseResult& p) {
          return role_value(p, Role::leader,
                            [](const MemberPhase& m) { return double(m.view_entries); });
        },
        [](const PhaseResult& p) {
          return role_value(p, Role::leader,
                            [](const MemberPhase& m) { return double(m.view_bytes) / 1e6; });
        }}},
      {"worker view entries (median)", {[](const PhaseResult& p) {
         return double(
             worker_spread(p, [](const MemberPhase& m) { return m.view_entries; }).median);
       }}},
      {"fleet view entries", {[](const PhaseResult& p) {
         return sum_members(p, [](const MemberPhase& m) { return double(m.view_entries); });
       }}},
      {"NATS connections / consumers / key subs",
       {[live](const PhaseResult& p) { return sum_members(p, live); },
        [](const PhaseResult& p) {
          return sum_members(p, [](const MemberPhase& m) { return double(m.consumers); });
        },
        [](const PhaseResult& p) {
          return sum_members(p, [](const MemberPhase& m) { return double(m.key_subscriptions); });
        }}},
      {"sim RSS MB", {[](const PhaseResult& p) { return double(p.rss_kb) / 1e3; }}},
  };
}

std::string fits(const Grid& g) {
  struct Named {
    std::string name;
    Get get;
  };
  const std::vector<Named> laws = {
      {"total deliveries", [](const PhaseResult& p) { return double(p.total.deliveries()); }},
      {"total store calls", [](const PhaseResult& p) { return double(p.total.operations()); }},
      {"worker deliveries (median)",
       [](const PhaseResult& p) {
         return double(
             worker_spread(p, [](const MemberPhase& m) { return m.ops.deliveries(); }).median);
       }},
      {"leader deliveries",
       [](const PhaseResult& p) {
         return role_value(p, Role::leader,
                           [](const MemberPhase& m) { return double(m.ops.deliveries()); });
       }},
      {"fleet view entries",
       [](const PhaseResult& p) {
         return sum_members(p, [](const MemberPhase& m) { return double(m.view_entries); });
       }},
  };
  std::string out =
      "| targeted | phase | quantity | fit (M = members) | residuals (measured / fit) |\n"
      "|---|---|---|---|---|\n";
  for (bool t : {false, true}) {
    for (std::size_t ph = 0; ph < g.phases.size(); ++ph) {
      for (const Named& n : laws) {
        const PowerLaw f = g.fit(t, ph, n.get);
        if (!f.ok) continue;
        std::string res;
        for (double r : f.residuals) res += fmt::format("{}{:.2f}", res.empty() ? "" : ", ", r);
        out += fmt::format("| {} | {} | {} | {:.3g} M^{:.2f} | {} |\n", t ? "on" : "off",
                           g.phases[ph], n.name, f.a, f.b, res);
      }
    }
  }
  return out;
}

}  // namespace

std::string markdown_report(const std::vector<ProjectionResult>& runs,
                            const std::vector<Refused>& refused) {
  Grid g;
  for (const ProjectionResult& r : runs) {
    g.runs[{r.params.targeted, r.params.members}] = &r;
    g.sizes.insert(r.params.members);
    if (g.phases.empty()) {
      for (const PhaseResult& p : r.phases) g.phases.push_back(p.name);
    }
  }
  for (const Refused& r : refused) g.sizes.insert(r.members);
  if (runs.empty()) return "no projection ran\n";
  const ProjectionParams& p0 = runs.front().params;
  std::string out = fmt::format(
      "{} splits, {} lanes per member, lease {} ms, rebalance delay {} ms, seed {}. Counts are "
      "per phase; `~x*` is extrapolated from the fit below (the run was refused).\n\n",
      p0.splits, p0.lanes, p0.lease_ms, p0.rebalance_delay_ms, p0.seed);
  for (const Refused& r : refused) {
    out += fmt::format("Not run: {} members, targeted {}: {}\n\n", r.members,
                       r.targeted ? "on" : "off", r.why);
  }
  const auto cols = phase_columns();
  for (std::size_t ph = 0; ph < g.phases.size(); ++ph) {
    out += fmt::format("**{}**\n\n{}\n", g.phases[ph], table(g, cols, ph));
  }
  const auto kinds = kind_columns();
  for (std::size_t ph = 0; ph < g.phases.size(); ++ph) {
    out += fmt::format("**{}: totals by kind**\n\n{}\n", g.phases[ph], table(g, kinds, ph));
  }
  const auto limits = limit_columns();
  for (std::size_t ph = 0; ph < g.phases.size(); ++ph) {
    out +=
        fmt::format("**{}: where the next limit is**\n\n{}\n", g.phases[ph], table(g, limits, ph));
  }
  out += fmt::format("**Growth laws**\n\n{}", fits(g));
  return out;
}

std::string csv_report(const std::vector<ProjectionResult>& runs) {
  std::string out =
      "members,targeted,phase,member,role,get,list,create,update,erase,watch_prefix,watch_keys,"
      "create_many,create_many_requests,deliv_job,deliv_member,deliv_lease,deliv_assign,"
      "deliv_split,deliv_other,view_entries,view_bytes,consumers,key_subscriptions\n";
  for (const ProjectionResult& r : runs) {
    for (const PhaseResult& p : r.phases) {
      for (const MemberPhase& m : p.members) {
        const OpCounts& c = m.ops;
        out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},", r.params.members,
                           r.params.targeted ? 1 : 0, p.name, m.id, to_string(m.role), c.get,
                           c.list, c.create, c.update, c.erase, c.watch_prefix, c.watch_keys,
                           c.create_many, c.create_many_requests);
        for (std::uint64_t d : c.delivered) out += fmt::format("{},", d);
        out += fmt::format("{},{},{},{}\n", m.view_entries, m.view_bytes, m.consumers,
                           m.key_subscriptions);
      }
    }
  }
  return out;
}

}  // namespace etlc::sim
