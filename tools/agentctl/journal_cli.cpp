// The journal as the CLI uses it (journal_cli.hpp).
#include "journal_cli.hpp"

#include <agentctl/leftovers.hpp>
#include <agentctl/version.hpp>
#include <agentctl/watchdog.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <ctime>

namespace asio = boost::asio;
namespace json = boost::json;

namespace agentctl::cli {

std::optional<std::string> journal_path(const command_line& cl, bool create_dir, journal_error& error) {
    if (cl.db) return *cl.db;
    host_environment host = process_environment();
    auto where = default_journal_location(host.lookup, passwd_home_dir);
    if (!where) {
        error = where.error();
        return std::nullopt;
    }
    if (create_dir)
        if (auto e = make_state_dir(where->state_dir)) {
            error = *e;
            return std::nullopt;
        }
    return where->db_path;
}

int print_journal_failure(const command_line& cl, const journal_error& e) {
    if (cl.output == output_format::human) return print_failure(cl, e.message, exit_status::persistence);
    std::string help =
        e.code == journal_errc::unknown_run ? "`agentctl runs` lists the recorded runs"
        : e.code == journal_errc::run_live
            ? "wait for it to end, or stop the agentctl that drives it"
            : "check the file, or name another one with --db PATH (run also takes --no-journal)";
    diagnostics d;
    d.error("journal_" + std::string(to_string(e.code)), "", e.message, help, {});
    return print_failure(cl, e.message, exit_status::persistence, d);
}

std::optional<journal> open_journal(const command_line& cl, journal_access access, int& status) {
    journal_error error;
    auto path = journal_path(cl, access == journal_access::write, error);
    if (!path) {
        status = print_journal_failure(cl, error);
        return std::nullopt;
    }
    auto db = journal::open(*path, access);
    if (!db) {
        status = print_journal_failure(cl, db.error());
        return std::nullopt;
    }
    return std::move(*db);
}

std::optional<int> take_last_run(command_line& cl, journal& db) {
    if (!cl.last) return std::nullopt;
    auto newest = db.list_runs(1);
    if (!newest) return print_journal_failure(cl, newest.error());
    if (newest->empty())
        return print_journal_failure(cl,
                                     {journal_errc::unknown_run, "--last: no runs recorded in " + db.path()});
    cl.run_id = newest->front().run_id;
    return std::nullopt;
}

void warn_running_leftovers(journal& db, const std::string& run_id, diagnostics& d) {
    auto dead = db.dead_runs(owner_alive_here);
    if (!dead) return;
    for (const journal_dead_run& run : *dead) {
        if (run.run_id != run_id) continue;
        std::vector<started_tree> trees;
        for (const attempt_handle& h : run.handles)
            if (!h.cgroup.empty() || (h.pid && h.pid_start_time))
                trees.push_back(
                    {h.cgroup, static_cast<pid_t>(h.pid.value_or(0)), h.pid_start_time.value_or(0)});
        running_leftovers left = find_running_leftovers(trees);
        if (!left.any()) return;
        std::string where;
        if (!left.cgroups.empty())
            where += std::to_string(left.cgroups.size()) + " cgroup" + (left.cgroups.size() == 1 ? "" : "s") +
                     " (" + left.cgroups.front() + (left.cgroups.size() > 1 ? ", ..." : "") + ")";
        if (!left.groups.empty()) {
            where += where.empty() ? "" : " and ";
            where += "process group";
            where += left.groups.size() == 1 ? "" : "s";
            for (std::size_t i = 0; i < left.groups.size() && i < 5; ++i)
                where += (i ? ", " : " ") + std::to_string(left.groups[i]);
            if (left.groups.size() > 5) where += ", ...";
        }
        std::string help =
            left.cgroups.empty() ? "" : "`agentctl runs gc` kills what dead runs left in cgroups";
        if (!left.groups.empty())
            help +=
                (help.empty() ? "" : "; ") + std::string("kill a process group with `kill -KILL -- -PGID`");
        d.warning("dead_run_still_running", "",
                  "run " + run_id + " is dead (its agentctl, pid " + std::to_string(run.owner.pid) +
                      ", is gone) but " + std::to_string(left.processes) + " process" +
                      (left.processes == 1 ? "" : "es") + " it started " +
                      (left.processes == 1 ? "is" : "are") + " still running, in " + where,
                  help);
        return;
    }
}

journal_recorder::journal_recorder(asio::any_io_executor run_executor, journal db) : path_(db.path()) {
    writer_ = std::make_unique<journal_writer>(run_executor, thread_.get_executor(), std::move(db));
}

journal_recorder::~journal_recorder() {
    // The writer commits what is queued on its thread before that thread ends.
    writer_.reset();
    thread_.join();
}

std::optional<journal_error> journal_recorder::close(asio::io_context& io) {
    if (closed_) return std::nullopt;
    closed_ = true;
    std::optional<journal_error> result;
    bool done = false;
    io.restart();
    writer_->async_close([&](std::optional<journal_error> e) {
        result = std::move(e);
        done = true;
    });
    while (!done && io.run_one()) {
    }
    return result;
}

dead_run_sweep sweep_dead_runs(journal* db, bool whole_host) {
    dead_run_sweep out;
    out.removed = sweep_dead_owners();
    std::vector<journal_dead_run> dead;
    if (db) {
        auto listed = db->dead_runs(owner_alive_here);
        if (!listed) {
            out.error = listed.error();
            return out;
        }
        dead = std::move(*listed);
    }
    // Slurm is asked about the dead runs that used it (or, for gc, about every dead run).
    std::vector<std::string> slurm_runs;
    for (const auto& d : dead) {
        auto run = db->load_run(d.run_id);
        if (run && run->options_json.find("\"backend\":\"slurm\"") != std::string::npos)
            slurm_runs.push_back(d.run_id);
    }
    // Both sweeps at once, on one loop: gc waits for the slower, not for their sum.
    if (whole_host || !slurm_runs.empty()) {
        host_environment host = process_environment();
        asio::io_context io(1);
        slurm_leftover_options so;
        so.search_path = host.search_path;
        so.host_env = host.lookup;
        if (!whole_host) so.run_ids = slurm_runs;
        async_cancel_slurm_leftovers(io.get_executor(), std::move(so), [&](slurm_leftover_report r) {
            out.removed.slurm_cancelled = std::move(r.cancelled);
            out.removed.slurm_left = std::move(r.left);
            // Not listed at all (no controller here): said, not counted as a job left.
            if (r.error && r.cancelled.empty() && r.left.empty())
                out.warnings.warning(
                    "slurm_sweep_failed", "", r.error->message,
                    "Slurm jobs of dead runs are looked for again by the next run, resume or runs gc");
            else if (r.error)
                out.removed.slurm_left.push_back("(" + r.error->message + ")");
        });
        if (whole_host) {
            container_leftover_options co;
            co.search_path = host.search_path;
            co.host_env = host.lookup;
            async_remove_container_leftovers(
                io.get_executor(), std::move(co), [&](container_leftover_report r) {
                    for (auto& c : r.containers) out.removed.containers.push_back(std::move(c));
                    for (const auto& why : r.unlisted)
                        out.warnings.warning(
                            "container_sweep_failed", "",
                            "containers of dead runs could not be listed: " + why,
                            "they are looked for again by the next run that uses the engine, or runs gc");
                });
        }
        io.run();
    }
    for (const auto& d : dead) out.dead_owners.push_back(d.owner);
    // What they left is gone (or reported): they are interrupted now, not running.
    for (const auto& d : dead) {
        if (auto e = db->mark_interrupted(d.run_id, d.owner)) {
            out.error = *e;
            return out;
        }
        out.interrupted.push_back(d.run_id);
    }
    return out;
}

journal_run run_record(const command_line& cl, const session& s, const std::string& base_dir) {
    journal_run r;
    r.workflow_path = cl.file;
    r.workflow_source = s.source;
    r.base_dir = base_dir;
    r.inputs_json = json::serialize(s.compiled->inputs);
    json::array argv;
    for (const auto& a : cl.argv) argv.emplace_back(a);
    r.argv_json = json::serialize(argv);
    json::object options;
    if (cl.jobs) options["jobs"] = *cl.jobs;
    options["keepGoing"] = cl.keep_going;
    // A resumed preview stays a preview.
    if (cl.check) options["check"] = true;
    if (cl.diff) options["diff"] = true;
    options["backend"] = to_string(cl.backend);
    if (cl.backend == backend_kind::slurm) {
        json::object slurm;
        if (!cl.slurm.partition.empty()) slurm["partition"] = cl.slurm.partition;
        if (!cl.slurm.account.empty()) slurm["account"] = cl.slurm.account;
        if (!cl.slurm.qos.empty()) slurm["qos"] = cl.slurm.qos;
        if (cl.slurm.cpus_per_task) slurm["cpusPerTask"] = *cl.slurm.cpus_per_task;
        if (cl.slurm.mem_mib) slurm["memMiB"] = *cl.slurm.mem_mib;
        if (cl.slurm.dispatch != slurm_dispatch::automatic)
            slurm["dispatch"] = cl.slurm.dispatch == slurm_dispatch::worker ? "worker" : "job";
        if (cl.slurm.nodes > 0) slurm["nodes"] = cl.slurm.nodes;
        if (!cl.slurm.time.empty()) slurm["time"] = cl.slurm.time;
        options["slurm"] = std::move(slurm);
    }
    if (cl.timeout_seconds) options["timeoutSeconds"] = *cl.timeout_seconds;
    // Every task's timeout and attempts: a resume compiles the same plan with them.
    if (cl.task_timeout_seconds) options["taskTimeoutSeconds"] = *cl.task_timeout_seconds;
    if (cl.task_attempts) options["retries"] = *cl.task_attempts;
    // What a resume needs to compile the same plan (prepare_resume reads them back).
    if (!s.var_overrides.empty()) options["vars"] = s.var_overrides;
    if (!s.vars_files.empty()) options["varsFiles"] = s.vars_files;
    r.options_json = json::serialize(options);
    r.agentctl_version = std::string(version());
    return r;
}

std::string utc_text(std::int64_t ms) {
    std::time_t t = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace agentctl::cli
