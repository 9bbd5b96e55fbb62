// Reading a journal, claiming runs and gc: the synchronous `journal` handle.
#include <agentctl/journal.hpp>
#include <agentctl/json.hpp>

#include "exec/state_files.hpp"
#include "journal/codec.hpp"
#include "journal/db.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

namespace agentctl {

namespace json = boost::json;
using journal_detail::reset_guard;
using journal_detail::statement;

bool journal_attempt::uncertain() const {
    if (!end) return true;
    if (cleanup_failed) return true;
    // The worker went with the task: whether the task had its effect is unknown.
    if (end->error && end->error->code == error_code::worker_lost) return true;
    if (end->state == task_state::timed_out) return true;
    if (end->state != task_state::cancelled) return false;
    // Cancelled before its process or container existed: on this host the handle is recorded
    // as soon as one does (a container's name before it is created), ahead of the end, so an
    // end without one ran nothing. So on an allocation worker, whose `started` is recorded as
    // the handle: a run cancelled in the worker's queue never started (docs/WORKER.md,
    // "Pipelining"). A Slurm job's id is known only once squeue lists it, and a pure action
    // records no handle: there the missing handle proves nothing.
    if (!end->slurm_worker.empty()) return handle.has_value();
    return handle.has_value() || end->isolation.empty() || end->backend != "local";
}

journal::journal(std::unique_ptr<detail::journal_db> db) : db_(std::move(db)) {}
journal::journal(journal&&) noexcept = default;
journal& journal::operator=(journal&&) noexcept = default;
journal::~journal() = default;

journal_result<journal> journal::open(const std::string& path, journal_access access,
                                      const journal_open_options& options) {
    auto db = journal_detail::open_db(path, access, options);
    if (!db) return db.error();
    return journal(std::move(*db));
}

const std::string& journal::path() const {
    return db_->path;
}

bool journal::quick_checked() const {
    return db_ && db_->quick_checked;
}

namespace {

journal_error closed_error() {
    return journal_error{journal_errc::closed, "journal: this handle was moved from or closed"};
}

journal_error unknown_run_error(const detail::journal_db& db, std::string_view run_id) {
    return journal_error{journal_errc::unknown_run,
                         "journal " + db.path + ": no run \"" + std::string(run_id) + "\""};
}

std::optional<task_error> error_of(const statement& s, int code_col, int message_col) {
    if (s.is_null(code_col)) return std::nullopt;
    return task_error{error_code_from_string(s.text(code_col)).value_or(error_code::internal_error),
                      std::string(s.text(message_col))};
}

// `sql` prepared, or the error saying it happened while `doing`.
journal_result<statement> prepare(detail::journal_db& db, std::string_view doing, std::string_view sql) {
    int rc = SQLITE_OK;
    statement s = db.conn.prepare(sql, rc);
    if (!s) return db.error(rc, doing);
    return s;
}

// `sql`, whose one parameter is the run id, stepped onto the run's row; else the error
// (`unknown_run` when there is no such run), saying it happened while `doing`.
journal_result<statement> run_row(detail::journal_db& db, std::string_view sql, std::string_view run_id,
                                  const char* doing) {
    auto s = prepare(db, doing, sql);
    if (!s) return s.error();
    s->bind(1, run_id);
    int rc = s->step();
    if (rc == SQLITE_DONE) return unknown_run_error(db, run_id);
    if (rc != SQLITE_ROW) return db.error(db.last_rc(), doing);
    return s;
}

// The run's internal key, or an error.
journal_result<std::int64_t> run_seq_of(detail::journal_db& db, std::string_view run_id) {
    auto s = run_row(db, "SELECT run_seq FROM runs WHERE run_id = ?", run_id, "looking up a run");
    if (!s) return s.error();
    return s->int64(0);
}

// A query over one run's rows: the run's key, and `sql` prepared with it bound as the first
// parameter; or the error (the journal closed, `unknown_run`, or what went wrong `doing`).
struct run_query {
    std::int64_t seq;
    statement s;
};

journal_result<run_query> query_run(detail::journal_db* db, std::string_view run_id, std::string_view sql,
                                    const char* doing) {
    if (!db) return closed_error();
    auto seq = run_seq_of(*db, run_id);
    if (!seq) return seq.error();
    auto s = prepare(*db, doing, sql);
    if (!s) return s.error();
    s->bind(1, *seq);
    return run_query{*seq, std::move(*s)};
}

// The process a handle names: pid, pid_start, cgroup, container, container_engine and
// slurm_job_id, the columns from `first` on.
void read_handle(const statement& s, int first, attempt_handle& h) {
    h.pid = s.opt_int64(first);
    if (!s.is_null(first + 1)) h.pid_start_time = s.uint64(first + 1);
    s.texts_from(first + 2, h.cgroup, h.container, h.container_engine, h.slurm_job_id);
}

journal_owner owner_of(const statement& s, int first) {
    journal_owner o;
    s.texts_from(first, o.host, o.boot_id);
    o.pid = s.int64(first + 2);
    o.start_time = s.uint64(first + 3);
    return o;
}

struct counts {
    std::map<std::string, std::uint32_t> by_state;
    std::uint32_t reused = 0;
    std::uint32_t recorded = 0;
};

counts parse_counts(std::string_view text) {
    counts c;
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec || !v.is_object()) return c;
    auto& o = v.get_object();
    if (auto* s = o.if_contains("states"); s && s->is_object())
        for (const auto& m : s->get_object())
            if (m.value().is_int64())
                c.by_state[std::string(m.key())] = static_cast<std::uint32_t>(m.value().get_int64());
    if (auto* r = o.if_contains("reused"); r && r->is_int64())
        c.reused = static_cast<std::uint32_t>(r->get_int64());
    if (auto* r = o.if_contains("recorded"); r && r->is_int64())
        c.recorded = static_cast<std::uint32_t>(r->get_int64());
    return c;
}

}  // namespace

namespace journal_detail {

/// Counts of a run's final results, from its rows (a running run's counts are not stored).
std::optional<journal_error> count_results(detail::journal_db& db, std::int64_t run_seq, counts& c);

/// The counts as stored in runs.counts_json when a run ends.
std::string counts_json_of(detail::journal_db& db, std::int64_t run_seq,
                           std::optional<journal_error>& error) {
    counts c;
    error = count_results(db, run_seq, c);
    json::object states;
    for (const auto& [k, v] : c.by_state) states[k] = v;
    json::object o{{"states", std::move(states)}, {"reused", c.reused}, {"recorded", c.recorded}};
    return to_json(o);
}

std::optional<journal_error> count_results(detail::journal_db& db, std::int64_t run_seq, counts& c) {
    // From version 4 on, each range's tasks too, less those with a row of their own (recorded
    // later, by a resume).
    std::string sql =
        "SELECT state, reused, count(*) FROM results WHERE run_seq = ?1 AND NOT (attempts = 0 AND "
        "(error_code IS NULL OR error_code = 'child_failed')) GROUP BY state, reused";
    if (db.schema_version >= 4)
        sql +=
            " UNION ALL SELECT state, 0, sum(end_task - first_task - (SELECT count(*) FROM results WHERE "
            "results.run_seq = unstarted.run_seq AND task_index >= first_task AND task_index < end_task)) "
            "FROM unstarted WHERE run_seq = ?1 GROUP BY state";
    int rc = SQLITE_OK;
    // A foreach or matrix parent is not a task that runs: its children are counted. It is the
    // one final without an attempt and without an error of its own (at most child_failed):
    // every other task that did not run says why (a condition, a failed need, not started).
    auto s = prepare(db, "counting results", sql);
    if (!s) return s.error();
    s->bind(1, run_seq);
    while ((rc = s->step()) == SQLITE_ROW) {
        auto n = s->uint32(2);
        if (n == 0) continue;  // a range whose tasks all have rows
        c.by_state[std::string(s->text(0))] += n;
        if (s->int64(1)) c.reused += n;
        c.recorded += n;
    }
    if (rc != SQLITE_DONE) return db.error(db.last_rc(), "counting results");
    return std::nullopt;
}

journal_result<std::pair<std::int64_t, std::uint32_t>> claim_in_transaction(detail::journal_db& db,
                                                                            std::string_view run_id,
                                                                            const journal_owner& owner,
                                                                            const owner_alive_fn& alive) {
    auto row = run_row(db,
                       "SELECT run_seq, state, segment, owner_host, owner_boot_id, owner_pid, owner_start FROM "
                       "runs WHERE run_id = ?",
                       run_id, "claiming a run");
    if (!row) return row.error();
    statement& s = *row;
    std::int64_t seq = s.int64(0);
    bool running = s.text(1) == "running";
    auto segment = s.uint32(2);
    journal_owner previous = owner_of(s, 3);
    // Only a running run has an owner that matters: a finished one may be resumed by the
    // very process that ran it.
    if (running && alive && alive(previous))
        return journal_error{journal_errc::run_live,
                             "run " + std::string(run_id) + " is live: its owner (pid " +
                                 std::to_string(previous.pid) + " on " + previous.host +
                                 ") is still running it; journal " + db.path};
    auto u =
        prepare(db, "claiming a run",
                "UPDATE runs SET owner_host = ?, owner_boot_id = ?, owner_pid = ?, owner_start = ?, state = "
                "'running', "
                "segment = ?, claimed_ms = ?, ended_ms = NULL, duration_ms = NULL, error_code = NULL, "
                "error_message = NULL, counts_json = NULL WHERE run_seq = ?");
    if (!u) return u.error();
    u->bind_from(1, owner.host, owner.boot_id, owner.pid, owner.start_time, segment + 1, now_ms(), seq);
    if (u->step() != SQLITE_DONE) return db.error(db.last_rc(), "claiming a run");
    return std::pair<std::int64_t, std::uint32_t>{seq, segment + 1};
}

}  // namespace journal_detail

journal_result<std::vector<journal_run_summary>> journal::list_runs(std::size_t limit,
                                                                    const owner_alive_fn& alive) {
    if (!db_) return closed_error();
    auto& db = *db_;
    int rc = SQLITE_OK;
    auto s = prepare(
        db, "listing runs",
        "SELECT run_seq, run_id, workflow_name, workflow_path, state, created_ms, ended_ms, duration_ms, "
        "task_count, "
        "segment, counts_json, owner_host, owner_boot_id, owner_pid, owner_start FROM runs "
        "ORDER BY created_ms DESC, run_seq DESC LIMIT ?");
    if (!s) return s.error();
    s->bind(1, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
    std::vector<journal_run_summary> out;
    std::vector<std::int64_t> to_count;  // runs without stored counts (still running or crashed)
    while ((rc = s->step()) == SQLITE_ROW) {
        journal_run_summary r;
        s->texts_from(1, r.run_id, r.workflow_name, r.workflow_path);
        r.state = parse_journal_run_state(s->text(4)).value_or(journal_run_state::failed);
        r.created_ms = s->int64(5);
        r.ended_ms = s->opt_int64(6);
        if (!s->is_null(7)) r.duration_ms = s->uint64(7);
        r.task_count = s->uint32(8);
        r.segment = s->uint32(9);
        r.owner = owner_of(*s, 11);
        if (!s->is_null(10)) {
            counts c = parse_counts(s->text(10));
            r.tasks_by_state = std::move(c.by_state);
            r.reused = c.reused;
            r.recorded = c.recorded;
            to_count.push_back(0);
        } else {
            to_count.push_back(s->int64(0));
        }
        if (r.state == journal_run_state::running && alive && !alive(r.owner))
            r.state = journal_run_state::interrupted;
        out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return db.error(db.last_rc(), "listing runs");
    s->reset();
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (!to_count[i]) continue;
        counts c;
        if (auto e = journal_detail::count_results(db, to_count[i], c)) return *e;
        out[i].tasks_by_state = std::move(c.by_state);
        out[i].reused = c.reused;
        out[i].recorded = c.recorded;
    }
    return out;
}

journal_result<journal_run> journal::load_run(std::string_view run_id) {
    if (!db_) return closed_error();
    auto& db = *db_;
    // From version 4 on, the source and the inputs are in run_documents (those of older runs
    // stayed in `runs`).
    const bool documents = db.schema_version >= 4;
    const std::string source =
        documents ? "coalesce(d.workflow_source, r.workflow_source)" : "r.workflow_source";
    const std::string inputs = documents ? "coalesce(d.inputs_json, r.inputs_json)" : "r.inputs_json";
    auto row = run_row(
        db,
        "SELECT run_id, workflow_name, workflow_path, " + source +
            ", workflow_digest, plan_digest, base_dir, " + inputs +
            ", argv_json, options_json, agentctl_version, task_count, owner_host, owner_boot_id, "
            "owner_pid, owner_start, created_ms, segment, claimed_ms, state, ended_ms, duration_ms, "
            "error_code, error_message FROM runs r" +
            (documents ? " LEFT JOIN run_documents d ON d.run_seq = r.run_seq" : "") + " WHERE run_id = ?",
        run_id, "loading a run");
    if (!row) return row.error();
    statement& s = *row;
    journal_run r;
    s.texts_from(0, r.run_id, r.workflow_name, r.workflow_path);
    r.workflow_source = s.blob(3);
    s.texts_from(4, r.workflow_digest, r.plan_digest, r.base_dir, r.inputs_json, r.argv_json, r.options_json,
                 r.agentctl_version);
    r.task_count = s.uint32(11);
    r.owner = owner_of(s, 12);
    r.created_ms = s.int64(16);
    r.segment = s.uint32(17);
    r.claimed_ms = s.opt_int64(18).value_or(0);
    r.state = parse_journal_run_state(s.text(19)).value_or(journal_run_state::failed);
    r.ended_ms = s.opt_int64(20);
    if (!s.is_null(21)) r.duration_ms = s.uint64(21);
    r.error = error_of(s, 22, 23);
    return r;
}

namespace {

// Columns 0-8 of every results query; with streams, the result's own stream columns follow.
// A result_json of '' is that of the end of streams_attempt (docs/JOURNAL.md, "results"):
// the one place that reads it so.
constexpr const char* result_columns =
    "task_index, task_id, segment, recorded_ms, reused, streams_attempt, stdout_length, stderr_length, "
    "CASE result_json WHEN '' THEN (SELECT attempts.result_json FROM attempts WHERE attempts.run_seq = "
    "results.run_seq AND attempts.task_index = results.task_index AND attempts.attempt = "
    "results.streams_attempt) ELSE result_json END";
constexpr const char* own_stream_columns =
    ", stdout_length, stdout_crc, stdout_file, stdout_blob, stderr_length, stderr_crc, stderr_file, "
    "stderr_blob";
constexpr int own_streams_at = 9;

// A final result's streams: its own columns, or those of the attempt they belong to.
class stream_loader {
public:
    explicit stream_loader(detail::journal_db& db) : db_(db) {}

    std::optional<journal_error> load(std::int64_t run_seq, const statement& row, journal_task_result& out) {
        const statement* cols = &row;
        int first = own_streams_at;
        if (out.streams_attempt) {
            if (!attempt_) {
                auto s = prepare(db_, "reading a stream",
                                 "SELECT stdout_length, stdout_crc, stdout_file, stdout_blob, stderr_length, "
                                 "stderr_crc, stderr_file, stderr_blob FROM attempts WHERE run_seq = ? AND "
                                 "task_index = ? AND attempt = ?");
                if (!s) return s.error();
                attempt_ = std::move(*s);
            }
            attempt_.reset();
            attempt_.bind_from(1, run_seq, out.task_index, *out.streams_attempt);
            int rc = attempt_.step();
            if (rc == SQLITE_DONE)
                return journal_error{journal_errc::corrupt, "journal " + db_.path +
                                                                ": the attempt holding the streams of "
                                                                "task " +
                                                                out.task_id + " is missing"};
            if (rc != SQLITE_ROW) return db_.error(db_.last_rc(), "reading a stream");
            cols = &attempt_;
            first = 0;
        }
        // Each stream straight into its place in the result, sized from its recorded length.
        for (bool is_stdout : {true, false}) {
            const int at = is_stdout ? first : first + 4;
            const std::uint64_t length = cols->is_null(at) ? 0 : cols->uint64(at);
            if (auto e = journal_detail::read_stored_stream(
                    db_, *cols, at,
                    std::string(is_stdout ? "the stdout" : "the stderr") + " of task " + out.task_id,
                    journal_detail::stream_appender(out.result, is_stdout, length)))
                return e;
        }
        if (out.streams_attempt) attempt_.reset();
        return std::nullopt;
    }

private:
    detail::journal_db& db_;
    statement attempt_;
};

std::optional<journal_error> result_from_row(detail::journal_db& db, const statement& s,
                                             journal_task_result& out) {
    out = journal_task_result{};
    out.task_index = s.uint32(0);
    out.task_id = s.text(1);
    out.segment = s.uint32(2);
    out.recorded_ms = s.int64(3);
    out.reused = s.int64(4) != 0;
    if (!s.is_null(5)) out.streams_attempt = s.uint32(5);
    out.stdout_bytes = s.uint64(6);
    out.stderr_bytes = s.uint64(7);
    if (!journal_detail::decode_result(s.text(8), out.result))
        return journal_error{journal_errc::corrupt, "journal " + db.path + ": the result of task " +
                                                        out.task_id + " cannot be read"};
    return std::nullopt;
}

// A range of tasks a segment left unstarted (schema 4), with the final each of them has.
struct unstarted_range {
    std::uint32_t first = 0, end = 0;
    std::uint32_t segment = 0;
    std::int64_t recorded_ms = 0;
    task_result result;

    // Task `index`'s final, as a row would read (streams: empty ones, as a row without any).
    void result_of(std::uint32_t index, bool with_streams, journal_task_result& out) const {
        out = journal_task_result{};
        out.task_index = index;
        out.segment = segment;
        out.recorded_ms = recorded_ms;
        out.result = result;
        if (with_streams) {
            journal_detail::attach_stream(out.result, true, std::string());
            journal_detail::attach_stream(out.result, false, std::string());
        }
    }
};

// The run's ranges that meet tasks [first, end), in task order; none before schema 4. Few: a
// segment records one per stretch of tasks it never reached.
journal_result<std::vector<unstarted_range>> unstarted_ranges(detail::journal_db& db, std::int64_t run_seq,
                                                              std::uint32_t first, std::uint32_t end) {
    std::vector<unstarted_range> out;
    if (db.schema_version < 4) return out;
    int rc = SQLITE_OK;
    auto s = prepare(
        db, "reading unstarted tasks",
        "SELECT first_task, end_task, segment, recorded_ms, result_json FROM unstarted WHERE run_seq = ? AND "
        "first_task < ? AND end_task > ? ORDER BY first_task");
    if (!s) return s.error();
    s->bind_from(1, run_seq, end, first);
    while ((rc = s->step()) == SQLITE_ROW) {
        unstarted_range r;
        r.first = s->uint32(0);
        r.end = s->uint32(1);
        r.segment = s->uint32(2);
        r.recorded_ms = s->int64(3);
        if (!journal_detail::decode_result(s->text(4), r.result))
            return journal_error{journal_errc::corrupt, "journal " + db.path +
                                                            ": the result of unstarted tasks " +
                                                            std::to_string(r.first) + " to " +
                                                            std::to_string(r.end - 1) + " cannot be read"};
        out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return db.error(db.last_rc(), "reading unstarted tasks");
    return out;
}

std::string results_query(bool with_streams, std::string_view where) {
    return std::string("SELECT ") + result_columns + (with_streams ? own_stream_columns : "") +
           " FROM results WHERE " + std::string(where);
}

}  // namespace

std::optional<journal_error> journal::for_each_result(std::string_view run_id, bool with_streams,
                                                      const std::function<bool(journal_task_result&)>& fn) {
    return for_each_result(run_id, with_streams, 0, std::numeric_limits<std::uint32_t>::max(), fn);
}

std::optional<journal_error> journal::for_each_result(std::string_view run_id, bool with_streams,
                                                      std::uint32_t first, std::uint32_t end,
                                                      const std::function<bool(journal_task_result&)>& fn) {
    // One statement walks the primary key in order: rows are read as the callback asks.
    auto q = query_run(
        db_.get(), run_id,
        results_query(with_streams, "run_seq = ? AND task_index >= ? AND task_index < ? ORDER BY task_index"),
        "reading results");
    if (!q) return q.error();
    auto& db = *db_;
    auto& [seq, s] = *q;
    s.bind(2, static_cast<std::int64_t>(first));
    s.bind(3, static_cast<std::int64_t>(end));
    // The first step opens the read transaction the ranges are read in too, while it lasts.
    int rc = s.step();
    auto ranges = unstarted_ranges(db, seq, first, end);
    if (!ranges) return ranges.error();
    // The rows and the ranges' tasks merged in task order; a task with a row of its own is
    // the row's (recorded after the range).
    std::size_t range = 0;
    std::uint32_t next = first;  // the first task a range may still yield
    journal_task_result r;
    auto yield_ranges_until = [&](std::uint32_t limit) {
        for (; range < ranges->size(); ++range) {
            const unstarted_range& g = (*ranges)[range];
            for (std::uint32_t i = std::max(next, g.first); i < std::min(limit, g.end); ++i) {
                g.result_of(i, with_streams, r);
                if (!fn(r)) return false;
            }
            if (g.end > limit) break;
        }
        return true;
    };
    stream_loader streams(db);
    for (; rc == SQLITE_ROW; rc = s.step()) {
        const std::uint32_t index = s.uint32(0);
        if (!yield_ranges_until(index)) return std::nullopt;
        next = index + 1;
        if (auto e = result_from_row(db, s, r)) return e;
        if (with_streams)
            if (auto e = streams.load(seq, s, r)) return e;
        if (!fn(r)) return std::nullopt;
    }
    if (rc != SQLITE_DONE) return db.error(db.last_rc(), "reading results");
    yield_ranges_until(end);
    return std::nullopt;
}

namespace {

// The one result of run `run_id` whose `where` (after run_seq = ?) matches `key`, or none.
template <typename Key>
journal_result<std::optional<journal_task_result>> load_one_result(detail::journal_db* handle,
                                                                   std::string_view run_id, const char* where,
                                                                   const Key& key, bool with_streams) {
    auto q = query_run(handle, run_id, results_query(with_streams, where), "reading a result");
    if (!q) return q.error();
    auto& db = *handle;
    auto& [seq, s] = *q;
    s.bind(2, key);
    int rc = s.step();
    if (rc == SQLITE_DONE) return std::optional<journal_task_result>();
    if (rc != SQLITE_ROW) return db.error(db.last_rc(), "reading a result");
    journal_task_result r;
    if (auto e = result_from_row(db, s, r)) return *e;
    if (with_streams) {
        stream_loader streams(db);
        if (auto e = streams.load(seq, s, r)) return *e;
    }
    return std::optional<journal_task_result>(std::move(r));
}

}  // namespace

// By id: no index on task ids (one more B-tree written per result), so a scan of the run's
// rows, which SQLite does at some million rows a second.
journal_result<std::optional<journal_task_result>> journal::load_result(std::string_view run_id,
                                                                        std::string_view task_id,
                                                                        bool with_streams) {
    return load_one_result(db_.get(), run_id, "run_seq = ? AND task_id = ?", task_id, with_streams);
}

journal_result<std::optional<journal_task_result>> journal::load_result_at(std::string_view run_id,
                                                                           std::uint32_t task_index,
                                                                           bool with_streams) {
    auto row = load_one_result(db_.get(), run_id, "run_seq = ? AND task_index = ?", task_index, with_streams);
    if (!row || *row) return row;
    auto seq = run_seq_of(*db_, run_id);
    if (!seq) return seq.error();
    auto ranges = unstarted_ranges(*db_, *seq, task_index, task_index + 1);
    if (!ranges) return ranges.error();
    if (ranges->empty()) return row;
    journal_task_result r;
    ranges->front().result_of(task_index, with_streams, r);
    return std::optional<journal_task_result>(std::move(r));
}

std::optional<journal_error> journal::read_stream(std::string_view run_id, std::string_view task_id,
                                                  journal_stream which,
                                                  const std::function<void(std::string_view)>& chunk,
                                                  std::optional<std::uint32_t> attempt) {
    constexpr std::string_view columns =
        "SELECT stdout_length, stdout_crc, stdout_file, stdout_blob, stderr_length, stderr_crc, stderr_file, "
        "stderr_blob FROM attempts WHERE run_seq = ? ";
    const int offset = which == journal_stream::stdout_stream ? 0 : 4;
    std::string what = std::string(which == journal_stream::stdout_stream ? "the stdout" : "the stderr") +
                       " of task " + std::string(task_id);
    int rc = SQLITE_OK;
    if (attempt) {
        // An attempt's own end: an earlier attempt of a retried task keeps its streams there.
        auto q = query_run(db_.get(), run_id,
                           std::string(columns) + "AND task_id = ? AND attempt = ? AND ended_ms IS NOT NULL",
                           "reading a stream");
        if (!q) return q.error();
        auto& db = *db_;
        q->s.bind(2, task_id);
        q->s.bind(3, static_cast<std::int64_t>(*attempt));
        rc = q->s.step();
        if (rc == SQLITE_DONE)
            return journal_error{journal_errc::unknown_run,
                                 "journal " + db.path + ": run " + std::string(run_id) +
                                     " has no end of task \"" + std::string(task_id) + "\" attempt " +
                                     std::to_string(*attempt)};
        if (rc != SQLITE_ROW) return db.error(db.last_rc(), "reading a stream");
        return journal_detail::read_stored_stream(db, q->s, offset,
                                                  what + " attempt " + std::to_string(*attempt), chunk);
    }
    auto q =
        query_run(db_.get(), run_id, results_query(true, "run_seq = ? AND task_id = ?"), "reading a stream");
    if (!q) return q.error();
    auto& db = *db_;
    auto& [seq, s] = *q;
    s.bind(2, task_id);
    rc = s.step();
    if (rc == SQLITE_DONE)
        return journal_error{journal_errc::unknown_run,
                             "journal " + db.path + ": run " + std::string(run_id) +
                                 " has no result for task \"" + std::string(task_id) + "\""};
    if (rc != SQLITE_ROW) return db.error(db.last_rc(), "reading a stream");
    if (s.is_null(5)) return journal_detail::read_stored_stream(db, s, own_streams_at + offset, what, chunk);
    auto a = prepare(db, "reading a stream", std::string(columns) + "AND task_index = ? AND attempt = ?");
    if (!a) return a.error();
    a->bind_from(1, seq, s.int64(0), s.int64(5));
    rc = a->step();
    if (rc != SQLITE_ROW) {
        if (rc == SQLITE_DONE)
            return journal_error{journal_errc::corrupt,
                                 "journal " + db.path + ": the attempt holding " + what + " is missing"};
        return db.error(db.last_rc(), "reading a stream");
    }
    return journal_detail::read_stored_stream(db, *a, offset, what, chunk);
}

journal_result<std::optional<journal_attempt>> journal::load_attempt(std::string_view run_id,
                                                                     std::string_view task_id,
                                                                     std::uint32_t attempt,
                                                                     bool with_streams) {
    std::optional<journal_attempt> found;
    auto e = for_each_attempt(run_id, [&](journal_attempt& a) {
        if (a.intent.task_id != task_id || a.intent.attempt != attempt) return true;
        found = std::move(a);
        return false;
    });
    if (e) return *e;
    if (!found || !found->end || !with_streams) return found;
    for (bool is_stdout : {true, false}) {
        std::string text;
        e = read_stream(
            run_id, task_id, is_stdout ? journal_stream::stdout_stream : journal_stream::stderr_stream,
            [&](std::string_view chunk) { text += chunk; }, attempt);
        if (e) return *e;
        journal_detail::attach_stream(*found->end, is_stdout, std::move(text));
    }
    return found;
}

std::optional<journal_error> journal::for_each_attempt(std::string_view run_id,
                                                       const std::function<bool(journal_attempt&)>& fn) {
    auto q = query_run(
        db_.get(), run_id,
        "SELECT task_index, attempt, segment, task_id, intent_ms, backend, isolation, argv_json, "
        "env_names_json, cwd, "
        "limits_json, handle_ms, pid, pid_start, cgroup, container, container_engine, slurm_job_id, "
        "ended_ms, "
        "cleanup_failed, stdout_length, stderr_length, result_json FROM attempts WHERE run_seq = ? "
        "ORDER BY task_index, attempt",
        "reading attempts");
    if (!q) return q.error();
    auto& db = *db_;
    statement& s = q->s;
    int rc = SQLITE_OK;
    while ((rc = s.step()) == SQLITE_ROW) {
        journal_attempt a;
        a.intent.task_index = s.uint32(0);
        a.intent.attempt = s.uint32(1);
        a.segment = s.uint32(2);
        a.intent.task_id = s.text(3);
        a.intent_ms = s.int64(4);
        a.intent.backend = s.text(5);
        a.intent.isolation = s.text(6);
        a.intent.argv = journal_detail::decode_strings(s.text(7));
        a.intent.env_names = journal_detail::decode_strings(s.text(8));
        if (!s.is_null(9)) a.intent.cwd = std::string(s.text(9));
        a.intent.limits = journal_detail::decode_object(s.text(10));
        if (!s.is_null(11)) {
            attempt_handle h;
            h.task_index = a.intent.task_index;
            h.attempt = a.intent.attempt;
            a.handle_ms = s.int64(11);
            read_handle(s, 12, h);
            a.handle = std::move(h);
        }
        if (!s.is_null(18)) {
            a.ended_ms = s.int64(18);
            a.cleanup_failed = s.int64(19) != 0;
            a.stdout_bytes = s.uint64(20);
            a.stderr_bytes = s.uint64(21);
            task_result r;
            if (!journal_detail::decode_result(s.text(22), r))
                return journal_error{journal_errc::corrupt,
                                     "journal " + db.path + ": the end of task " + a.intent.task_id +
                                         " attempt " + std::to_string(a.intent.attempt) + " cannot be read"};
            a.end = std::move(r);
        }
        if (!fn(a)) return std::nullopt;
    }
    if (rc != SQLITE_DONE) return db.error(db.last_rc(), "reading attempts");
    return std::nullopt;
}

journal_result<std::vector<journal_attempt>> journal::uncertain_attempts(std::string_view run_id) {
    std::vector<std::uint32_t> succeeded;  // in task_index order: the primary key's
    {
        auto q = query_run(
            db_.get(), run_id,
            "SELECT task_index FROM results WHERE run_seq = ? AND state = 'succeeded' ORDER BY task_index",
            "reading results");
        if (!q) return q.error();
        int rc = SQLITE_OK;
        while ((rc = q->s.step()) == SQLITE_ROW) succeeded.push_back(q->s.uint32(0));
        if (rc != SQLITE_DONE) return db_->error(db_->last_rc(), "reading results");
    }
    std::vector<journal_attempt> out;
    std::optional<journal_attempt> last;  // the latest attempt of the task being walked
    auto settle = [&] {
        if (last && !std::binary_search(succeeded.begin(), succeeded.end(), last->intent.task_index) &&
            last->uncertain())
            out.push_back(std::move(*last));
        last.reset();
    };
    auto e = for_each_attempt(run_id, [&](journal_attempt& a) {
        if (last && last->intent.task_index != a.intent.task_index) settle();
        last = std::move(a);
        return true;
    });
    if (e) return *e;
    settle();
    return out;
}

journal_result<std::vector<journal_dead_run>> journal::dead_runs(const owner_alive_fn& alive) {
    if (!db_) return closed_error();
    auto& db = *db_;
    int rc = SQLITE_OK;
    std::vector<std::pair<std::int64_t, journal_dead_run>> dead;
    {
        auto s =
            prepare(db, "finding dead runs",
                    "SELECT run_seq, run_id, owner_host, owner_boot_id, owner_pid, owner_start FROM runs "
                    "WHERE state = 'running' ORDER BY run_seq");
        if (!s) return s.error();
        while ((rc = s->step()) == SQLITE_ROW) {
            journal_dead_run d;
            d.run_id = s->text(1);
            d.owner = owner_of(*s, 2);
            if (alive && alive(d.owner)) continue;
            dead.emplace_back(s->int64(0), std::move(d));
        }
        if (rc != SQLITE_DONE) return db.error(db.last_rc(), "finding dead runs");
    }
    auto h = prepare(
        db, "finding dead runs",
        "SELECT task_index, attempt, pid, pid_start, cgroup, container, container_engine, slurm_job_id "
        "FROM attempts WHERE run_seq = ? AND handle_ms IS NOT NULL AND (ended_ms IS NULL OR cleanup_failed = "
        "1) "
        "ORDER BY task_index, attempt");
    if (!h) return h.error();
    std::vector<journal_dead_run> out;
    for (auto& [seq, d] : dead) {
        reset_guard guard(*h);
        h->bind(1, seq);
        while ((rc = h->step()) == SQLITE_ROW) {
            attempt_handle a;
            a.task_index = h->uint32(0);
            a.attempt = h->uint32(1);
            read_handle(*h, 2, a);
            d.handles.push_back(std::move(a));
        }
        if (rc != SQLITE_DONE) return db.error(db.last_rc(), "finding dead runs");
        out.push_back(std::move(d));
    }
    return out;
}

journal_result<std::uint32_t> journal::claim_run(std::string_view run_id, const journal_owner& owner,
                                                 const owner_alive_fn& alive) {
    if (!db_) return closed_error();
    std::uint32_t segment = 0;
    auto e =
        journal_detail::in_write_transaction(*db_, "claiming a run", [&]() -> std::optional<journal_error> {
            auto r = journal_detail::claim_in_transaction(*db_, run_id, owner, alive);
            if (!r) return r.error();
            segment = r->second;
            return std::nullopt;
        });
    if (e) return *e;
    return segment;
}

std::optional<journal_error> journal::mark_interrupted(std::string_view run_id,
                                                       const journal_owner& expected) {
    if (!db_) return closed_error();
    auto& db = *db_;
    return journal_detail::in_write_transaction(
        db, "marking a run interrupted", [&]() -> std::optional<journal_error> {
            auto u =
                prepare(db, "marking a run interrupted",
                        "UPDATE runs SET state = 'interrupted' WHERE run_id = ? AND state = 'running' AND "
                        "owner_host = ? AND owner_boot_id = ? AND owner_pid = ? AND owner_start = ?");
            if (!u) return u.error();
            u->bind_from(1, run_id, expected.host, expected.boot_id, expected.pid, expected.start_time);
            if (u->step() != SQLITE_DONE) return db.error(db.last_rc(), "marking a run interrupted");
            return std::nullopt;
        });
}

namespace {

std::uint64_t size_of(const std::string& path) {
    auto info = exec::probe_path(path);
    return info.error == 0 && info.is_regular ? info.size : 0;
}

// Stream files, as "RUNSEQ/NAME", with their sizes.
std::vector<std::pair<std::string, std::uint64_t>> stream_files(detail::journal_db& db) {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    if (journal_detail::streams_dir(db, false) != 0) return out;
    for (const auto& run : exec::list_directory(db.streams_dir.get())) {
        exec::unique_fd dir;
        if (exec::open_directory(db.streams_dir.get(), run, false, dir) != 0) continue;
        for (const auto& name : exec::list_directory(dir.get())) {
            int err = 0;
            out.emplace_back(run + "/" + name, exec::file_size(dir.get(), name, err).value_or(0));
        }
    }
    return out;
}

std::uint64_t total_bytes(detail::journal_db& db) {
    std::uint64_t n = size_of(db.path) + size_of(db.path + "-wal") + size_of(db.path + "-shm");
    for (const auto& f : stream_files(db)) n += f.second;
    return n;
}

std::optional<std::int64_t> parse_seq(std::string_view s) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || v <= 0) return std::nullopt;
    return v;
}

// The inline stream bytes of run ?1's attempts and results, and the stream files they name.
constexpr const char* delete_run_blobs =
    "DELETE FROM streams WHERE stream_id IN ("
    "SELECT stdout_blob FROM attempts WHERE run_seq = ?1 AND stdout_blob IS NOT NULL "
    "UNION ALL SELECT stderr_blob FROM attempts WHERE run_seq = ?1 AND stderr_blob IS NOT NULL "
    "UNION ALL SELECT stdout_blob FROM results WHERE run_seq = ?1 AND stdout_blob IS NOT NULL "
    "UNION ALL SELECT stderr_blob FROM results WHERE run_seq = ?1 AND stderr_blob IS NOT NULL)";
constexpr const char* select_run_files =
    "SELECT stdout_file FROM attempts WHERE run_seq = ?1 AND stdout_file IS NOT NULL "
    "UNION ALL SELECT stderr_file FROM attempts WHERE run_seq = ?1 AND stderr_file IS NOT NULL "
    "UNION ALL SELECT stdout_file FROM results WHERE run_seq = ?1 AND stdout_file IS NOT NULL "
    "UNION ALL SELECT stderr_file FROM results WHERE run_seq = ?1 AND stderr_file IS NOT NULL";

}  // namespace

journal_result<journal_gc_report> journal::gc(std::size_t keep, const owner_alive_fn& alive) {
    if (!db_) return closed_error();
    auto& db = *db_;
    journal_gc_report report;
    report.bytes_before = total_bytes(db);
    std::vector<std::int64_t> removed;
    std::vector<std::string> remove_dirs, remove_files;
    auto e =
        journal_detail::in_write_transaction(db, "removing old runs", [&]() -> std::optional<journal_error> {
            int rc = SQLITE_OK;
            std::set<std::int64_t> existing;
            {
                auto s = prepare(
                    db, "removing old runs",
                    "SELECT run_seq, state, owner_host, owner_boot_id, owner_pid, owner_start FROM runs "
                    "ORDER BY created_ms DESC, run_seq DESC");
                if (!s) return s.error();
                std::size_t position = 0;
                while ((rc = s->step()) == SQLITE_ROW) {
                    std::int64_t seq = s->int64(0);
                    bool live = s->text(1) == "running" && alive && alive(owner_of(*s, 2));
                    if (position++ < keep) {
                        ++report.runs_kept;
                        existing.insert(seq);
                    } else if (live) {
                        ++report.live_runs_kept;
                        existing.insert(seq);
                    } else {
                        removed.push_back(seq);
                    }
                }
                if (rc != SQLITE_DONE) return db.error(db.last_rc(), "removing old runs");
            }
            // Inline stream bytes first, found through the rows about to go.
            {
                auto d = prepare(db, "removing old runs", delete_run_blobs);
                if (!d) return d.error();
                for (auto seq : removed) {
                    reset_guard guard(*d);
                    d->bind(1, seq);
                    if (d->step() != SQLITE_DONE) return db.error(db.last_rc(), "removing old runs");
                }
            }
            static constexpr const char* tables[] = {"unstarted", "attempts", "results", "run_documents",
                                                     "runs"};
            for (const char* table : tables) {
                auto d = prepare(db, "removing old runs",
                                 std::string("DELETE FROM ") + table + " WHERE run_seq = ?");
                if (!d) return d.error();
                for (auto seq : removed) {
                    reset_guard guard(*d);
                    d->bind(1, seq);
                    if (d->step() != SQLITE_DONE) return db.error(db.last_rc(), "removing old runs");
                }
            }
            report.runs_removed = static_cast<std::uint32_t>(removed.size());
            // Stream files no row refers to. Writers write their files inside their write
            // transaction, so while this one holds the lock no file is written but not committed.
            if (journal_detail::streams_dir(db, false) != 0) return std::nullopt;
            auto files = prepare(db, "removing old runs", select_run_files);
            if (!files) return files.error();
            for (const auto& name : exec::list_directory(db.streams_dir.get())) {
                auto seq = parse_seq(name);
                if (!seq || !existing.count(*seq)) {
                    if (seq) remove_dirs.push_back(name);  // a removed run, or an orphan folder
                    continue;
                }
                std::set<std::string> referenced;
                {
                    reset_guard guard(*files);
                    files->bind(1, *seq);
                    while ((rc = files->step()) == SQLITE_ROW) referenced.insert(std::string(files->text(0)));
                    if (rc != SQLITE_DONE) return db.error(db.last_rc(), "removing old runs");
                }
                exec::unique_fd dir;
                if (exec::open_directory(db.streams_dir.get(), name, false, dir) != 0) continue;
                for (const auto& file : exec::list_directory(dir.get()))
                    if (!referenced.count(name + "/" + file)) remove_files.push_back(name + "/" + file);
            }
            return std::nullopt;
        });
    if (e) return *e;
    // After the commit, so that a failed commit never leaves rows without their files.
    std::set<std::int64_t> removed_set(removed.begin(), removed.end());
    for (const auto& dir : remove_dirs) {
        if (!removed_set.count(*parse_seq(dir))) {
            exec::unique_fd sub;
            if (exec::open_directory(db.streams_dir.get(), dir, false, sub) == 0)
                report.orphan_streams_removed +=
                    static_cast<std::uint32_t>(exec::list_directory(sub.get()).size());
        }
        if (int err = exec::remove_tree(db.streams_dir.get(), dir); err != 0)
            return journal_error{journal_errc::io_error, "journal " + db.path + ": cannot remove " +
                                                             db.streams_path + "/" + dir + ": " +
                                                             exec::errno_text(err)};
    }
    for (const auto& file : remove_files) {
        if (exec::remove_tree(db.streams_dir.get(), file) == 0) ++report.orphan_streams_removed;
    }
    // The freed pages go back to the file system, and the WAL that recorded the deletions
    // is emptied.
    if (int rc = db.conn.exec("PRAGMA incremental_vacuum;"); rc != SQLITE_OK)
        return db.error(rc, "reclaiming space");
    if (int rc = db.conn.exec("PRAGMA wal_checkpoint(TRUNCATE);"); rc != SQLITE_OK)
        return db.error(rc, "reclaiming space");
    report.bytes_after = total_bytes(db);
    return report;
}

std::optional<journal_error> journal::verify() {
    if (!db_) return closed_error();
    auto& db = *db_;
    int rc = SQLITE_OK;
    {
        auto s = prepare(db, "checking integrity", "PRAGMA integrity_check;");
        if (!s) return s.error();
        rc = s->step();
        if (rc != SQLITE_ROW) return db.error(db.last_rc(), "checking integrity");
        if (s->text(0) != "ok")
            return journal_error{
                journal_errc::corrupt,
                "journal " + db.path + ": damaged (integrity_check: " + std::string(s->text(0)) + ")"};
    }
    // Every stored stream: attempts', and results' own (not those that name an attempt's).
    for (const char* table : {"attempts", "results"}) {
        auto s = prepare(db, "checking streams",
                         std::string("SELECT task_id, stdout_length, stdout_crc, stdout_file, stdout_blob, "
                                     "stderr_length, stderr_crc, stderr_file, stderr_blob FROM ") +
                             table +
                             (std::string_view(table) == "results" ? " WHERE streams_attempt IS NULL" : ""));
        if (!s) return s.error();
        while ((rc = s->step()) == SQLITE_ROW) {
            std::string what =
                std::string("a stream of task ") + std::string(s->text(0)) + " (" + table + ")";
            for (int first : {1, 5})
                if (auto e = journal_detail::read_stored_stream(db, *s, first, what, [](std::string_view) {}))
                    return e;
        }
        if (rc != SQLITE_DONE) return db.error(db.last_rc(), "checking streams");
    }
    // A result stored as its end's JSON ('') names an end that is there.
    auto s =
        prepare(db, "checking results",
                "SELECT task_id FROM results WHERE result_json = '' AND NOT EXISTS (SELECT 1 FROM attempts a "
                "WHERE a.run_seq = results.run_seq AND a.task_index = results.task_index AND a.attempt = "
                "results.streams_attempt AND a.result_json IS NOT NULL) LIMIT 1");
    if (!s) return s.error();
    rc = s->step();
    if (rc == SQLITE_ROW)
        return journal_error{journal_errc::corrupt, "journal " + db.path + ": the result of task " +
                                                        std::string(s->text(0)) +
                                                        " is that of an attempt's end that is missing"};
    if (rc != SQLITE_DONE) return db.error(db.last_rc(), "checking results");
    return std::nullopt;
}

std::uint64_t journal::bytes() const {
    return db_ ? total_bytes(*db_) : 0;
}

std::vector<std::string> journal::files() const {
    std::vector<std::string> out;
    if (!db_) return out;
    for (const char* suffix : {"", "-wal", "-shm", "-seal"})
        if (exec::probe_path(db_->path + suffix).error == 0) out.push_back(db_->path + suffix);
    for (const auto& f : stream_files(*db_)) out.push_back(db_->streams_path + "/" + f.first);
    return out;
}

}  // namespace agentctl
