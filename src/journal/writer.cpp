// The journal writer: a queue filled by the run, drained by group commits on the worker.
//
// record_*() take a mutex, move the record into the queue and, if no drain is scheduled,
// post one to the worker. A drain takes the whole queue, applies it in one transaction and
// completes the syncs it covered; records that arrived meanwhile are the next drain's batch.
#include <agentctl/journal.hpp>

#include "exec/state_files.hpp"
#include "journal/codec.hpp"
#include "journal/db.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace agentctl {

namespace asio = boost::asio;
using journal_detail::reset_guard;
using journal_detail::statement;

namespace detail {

namespace {

using sync_handler = asio::any_completion_handler<void(std::optional<journal_error>)>;

// The writer's statements, each prepared on its first use (journal_writer_impl::prepare). The
// schema: docs/JOURNAL.md.
namespace sql {
constexpr const char* insert_run =
    "INSERT INTO runs(run_id, workflow_name, workflow_path, workflow_source, "
    "workflow_digest, plan_digest, "
    "base_dir, inputs_json, argv_json, options_json, agentctl_version, "
    "task_count, owner_host, owner_boot_id, "
    "owner_pid, owner_start, created_ms, segment, state) "
    "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 'running')";
constexpr const char* insert_documents =
    "INSERT INTO run_documents(run_seq, workflow_source, inputs_json) VALUES(?, ?, ?)";
constexpr const char* insert_blob = "INSERT INTO streams(data) VALUES(?)";
constexpr const char* insert_intent =
    "INSERT INTO attempts(run_seq, task_index, attempt, segment, task_id, intent_ms, "
    "backend, isolation, argv_json, env_names_json, cwd, limits_json) "
    "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
constexpr const char* update_handle =
    "UPDATE attempts SET handle_ms = ?, pid = ?, pid_start = ?, cgroup = ?, container = ?, "
    "container_engine = ?, slurm_job_id = ? "
    "WHERE run_seq = ? AND task_index = ? AND attempt = ? AND ended_ms IS NULL";
constexpr const char* update_end =
    "UPDATE attempts SET ended_ms = ?, state = ?, exit_code = ?, signal = ?, "
    "duration_ms = ?, error_code = ?, error_message = ?, cleanup_failed = ?, "
    "result_json = ?, stdout_length = ?, stdout_crc = ?, stdout_file = ?, "
    "stderr_length = ?, stderr_crc = ?, stderr_file = ?, stdout_blob = ?, "
    "stderr_blob = ? "
    "WHERE run_seq = ? AND task_index = ? AND attempt = ? AND ended_ms IS NULL";
constexpr const char* update_handle_end =
    "UPDATE attempts SET ended_ms = ?, state = ?, exit_code = ?, signal = ?, "
    "duration_ms = ?, error_code = ?, error_message = ?, cleanup_failed = ?, "
    "result_json = ?, stdout_length = ?, stdout_crc = ?, stdout_file = ?, "
    "stderr_length = ?, stderr_crc = ?, stderr_file = ?, stdout_blob = ?, "
    "stderr_blob = ?, handle_ms = ?, pid = ?, pid_start = ?, cgroup = ?, "
    "container = ?, container_engine = ?, slurm_job_id = ? "
    "WHERE run_seq = ? AND task_index = ? AND attempt = ? AND ended_ms IS NULL";
constexpr const char* find_end_streams =
    "SELECT stdout_length, stderr_length, result_json FROM attempts "
    "WHERE run_seq = ? AND task_index = ? AND attempt = ? AND ended_ms IS NOT NULL";
constexpr const char* insert_final =
    "INSERT OR REPLACE INTO results(run_seq, task_index, task_id, segment, recorded_ms, "
    "state, exit_code, signal, duration_ms, error_code, error_message, attempts, reused, "
    "streams_attempt, result_json, stdout_length, stdout_crc, stdout_file, stderr_length, "
    "stderr_crc, stderr_file, stdout_blob, stderr_blob) "
    "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
constexpr const char* delete_older_ranges = "DELETE FROM unstarted WHERE run_seq = ? AND segment < ?";
constexpr const char* delete_finals =
    "DELETE FROM results WHERE run_seq = ? AND task_index >= ? AND task_index < ?";
constexpr const char* insert_unstarted =
    "INSERT INTO unstarted(run_seq, first_task, end_task, segment, "
    "recorded_ms, state, result_json) VALUES(?, ?, ?, ?, ?, ?, ?)";
constexpr const char* update_run_end =
    "UPDATE runs SET state = ?, ended_ms = ?, duration_ms = ?, error_code = ?, "
    "error_message = ?, counts_json = ? WHERE run_seq = ?";
}  // namespace sql

struct claim_record {
    std::string run_id;
    journal_owner owner;
    owner_alive_fn alive;
};
struct close_record {};

// The final of record_end_and_final(end, task_id): the end's result without its streams, which
// the writer takes from the end queued just before it instead of a copy of its own.
struct final_of_end {
    std::uint32_t task_index = 0;
    std::uint32_t attempt = 0;
    std::string task_id;
};

using record = std::variant<journal_run, claim_record, attempt_intent, attempt_handle, attempt_end,
                            task_final, final_of_end, unstarted_tasks, journal_run_end, close_record>;

struct entry {
    record rec;
    std::int64_t ms = 0;      // when it was recorded (Unix time)
    std::uint64_t bytes = 0;  // what it holds in memory, roughly
};

std::uint64_t bytes_of(const task_result& r) {
    auto s = journal_detail::streams_of(r);
    return sizeof(task_result) + s.out.size() + s.err.size();
}

// A handler's executor with outstanding work, so that the run's io_context does not run out
// of work while a commit is in flight on the worker.
using tracked_executor = decltype(asio::prefer(std::declval<asio::any_completion_executor>(),
                                               asio::execution::outstanding_work.tracked));

struct waiter {
    std::uint64_t target = 0;  // completes once committed_ >= target
    sync_handler handler;
    tracked_executor work;
    bool after_close = false;  // registered once a close was queued: completes with `closed`
};

journal_error closed_error() {
    return journal_error{journal_errc::closed, "journal: the writer is closed"};
}

}  // namespace

class journal_writer_impl : public std::enable_shared_from_this<journal_writer_impl> {
public:
    journal_writer_impl(asio::any_io_executor ex, asio::any_io_executor worker, journal db,
                        journal_writer_options options)
        : ex_(std::move(ex)),
          worker_(asio::make_strand(std::move(worker))),
          db_(std::move(db.db_)),
          options_(options),
          pacing_(worker_) {
        if (db_) threshold_ = db_->options.stream_file_threshold;
    }

    bool push(record&& rec, std::uint64_t bytes) { return push_pair(std::move(rec), bytes, std::nullopt, 0); }

    // One record, or two under one lock: a drain takes both or neither, so they commit together.
    // Taken by reference down to the queue: a task's result is moved once into its record and
    // once into the queue.
    bool push_pair(record&& first, std::uint64_t first_bytes, std::optional<record>&& second,
                   std::uint64_t second_bytes) {
        bool post = false, above = false, stop = false;
        {
            std::lock_guard lock(mu_);
            if (closing_) return false;
            if (std::holds_alternative<close_record>(first)) closing_ = true;
            enqueue(std::move(first), first_bytes);
            if (second) enqueue(std::move(*second), second_bytes);
            above = queued_bytes_ >= options_.high_water_bytes;
            if (!posted_) post = posted_ = true;
            stop = stop_pacing();
        }
        if (post) schedule();
        if (stop) cut_pacing_short();
        return above;
    }

    // Under mu_.
    void enqueue(record&& rec, std::uint64_t bytes) {
        if (std::holds_alternative<attempt_intent>(rec)) ++in_flight_;
        if (std::holds_alternative<attempt_end>(rec) && in_flight_ > 0) --in_flight_;
        queue_.emplace_back(std::move(rec), journal_detail::now_ms(), bytes);
        ++queued_;
        queued_bytes_ += bytes;
        peak_queued_bytes_ = std::max(peak_queued_bytes_, queued_bytes_);
    }

    void sync(sync_handler handler, bool close) {
        auto work = asio::prefer(asio::get_associated_executor(handler, ex_),
                                 asio::execution::outstanding_work.tracked);
        std::optional<journal_error> result;
        bool complete_now = false, post = false, stop = false;
        {
            std::lock_guard lock(mu_);
            bool after_close = closing_;  // a sync (or a second close) once a close is queued
            if (close && !closing_) {
                closing_ = true;
                queue_.push_back(entry{close_record{}, journal_detail::now_ms(), 0});
                ++queued_;
                if (!posted_) post = posted_ = true;
            }
            // No drain scheduled means nothing is queued: everything is committed or failed.
            if (!posted_) {
                complete_now = true;
                result = error_;
                if (!result && after_close && closed_) result = closed_error();
            } else {
                waiters_.push_back(waiter{queued_, std::move(handler), std::move(work), after_close});
            }
            stop = stop_pacing();
        }
        if (post) schedule();
        if (stop) cut_pacing_short();
        if (complete_now) {
            // Never from inside the initiating call: through the worker first, which always
            // runs (a handler bound to another executor must not need `ex` to be running).
            asio::post(worker_, [h = std::move(handler), w = std::move(work),
                                 e = std::move(result)]() mutable {
                asio::dispatch(
                    w, [h = std::move(h), e = std::move(e)]() mutable { std::move(h)(std::move(e)); });
            });
        }
    }

    void claim(claim_record c, sync_handler handler) {
        push(std::move(c), 0);
        sync(std::move(handler), false);
    }

    journal_writer_stats stats() const {
        std::lock_guard lock(mu_);
        journal_writer_stats s = stats_;
        s.queued_bytes = queued_bytes_;
        s.peak_queued_bytes = peak_queued_bytes_;
        return s;
    }

    std::uint32_t segment() const { return segment_.load(std::memory_order_acquire); }

    // The writer object is gone: commit what is queued, then close on the worker.
    void release() { push(close_record{}, 0); }

private:
    void schedule() {
        asio::post(worker_, [self = shared_from_this()] { self->drain_when_due(); });
    }

    // Group commits are paced (docs/JOURNAL.md, "Group commits"): a commit may wait until
    // commit_interval after the previous one, to take the records that arrive meanwhile, but
    // only while that idles little: many attempts are in flight and at most a quarter of them
    // wait on a sync. A lone caller, a few slots, a close or a full queue never wait. Nor does
    // one sync at a time while the rest produce nothing (a chain of short tasks beside long
    // ones): a paced commit that answered a single waiter turns pacing off for the next
    // pace_probation commits, or until one answers two waiters or more.
    static constexpr std::uint64_t pace_min_in_flight = 8;
    static constexpr std::uint32_t pace_probation = 32;

    // Under mu_.
    bool may_pace() const {
        return options_.commit_interval.count() > 0 && !closing_ && unpaced_left_ == 0 &&
               queued_bytes_ < options_.high_water_bytes && in_flight_ >= pace_min_in_flight &&
               waiters_.size() * 4 <= in_flight_;
    }

    // Under mu_. Records no sync waits for (handles, ends, finals) are not worth a commit of
    // their own: they wait out the interval whatever the pacing rule says, and go with the
    // next commit a sync asks for (docs/JOURNAL.md, "Group commits").
    bool may_hold() const {
        return options_.commit_interval.count() > 0 && !closing_ && waiters_.empty() &&
               queued_bytes_ < options_.high_water_bytes;
    }

    // Under mu_: a paced wait is pending that may no longer wait.
    bool stop_pacing() {
        if (!pacing_armed_ || may_pace() || may_hold()) return false;
        pacing_armed_ = false;
        return true;
    }

    // The pending wait ends now (its handler drains). The timer is only touched on the strand.
    void cut_pacing_short() {
        asio::post(worker_, [self = shared_from_this()] { self->pacing_.cancel(); });
    }

    // On the worker: drain now, or when the paced wait ends.
    void drain_when_due() {
        bool busy = cpus_busy();
        auto due = last_commit_end_ + (busy ? options_.busy_commit_interval : options_.commit_interval);
        bool wait = false, pacing = false;
        {
            std::lock_guard lock(mu_);
            pacing = may_pace();
            wait = pacing_armed_ = (pacing || may_hold()) && std::chrono::steady_clock::now() < due;
        }
        if (!wait) {
            drain(false);
            return;
        }
        pacing_.expires_at(due);
        pacing_.async_wait([self = shared_from_this(), pacing, busy](const boost::system::error_code& ec) {
            // Paced: the wait held a sync back. A hold (records nobody waited for) that a sync
            // cut short did not.
            bool paced = pacing;
            {
                std::lock_guard lock(self->mu_);
                self->pacing_armed_ = false;
                if (!ec && !self->waiters_.empty()) paced = true;
            }
            self->drain(paced, paced && busy);
        });
    }

    // On the worker: whether the machine's CPUs were busy when last looked at, at most every
    // quarter second (docs/JOURNAL.md, "Group commits"). A longer interval then costs no work:
    // a start that waits for its commit holds back no CPU that was free.
    static constexpr double busy_idle_share = 0.15;
    static constexpr std::chrono::milliseconds idle_window{250};
    bool cpus_busy() {
        if (options_.busy_commit_interval <= options_.commit_interval) return false;
        auto now = std::chrono::steady_clock::now();
        if (now - idle_sampled_ >= idle_window) {
            idle_sampled_ = now;
            if (!options_.cpu_idle && !idle_meter_) idle_meter_.emplace();
            double idle = options_.cpu_idle ? options_.cpu_idle() : idle_meter_->sample();
            cpus_busy_ = idle >= 0 && idle < busy_idle_share;
        }
        return cpus_busy_;
    }

    // On the worker: one batch, one transaction. `paced`: it waited for the interval first;
    // `busy`: for busy_commit_interval.
    void drain(bool paced, bool busy = false) {
        std::deque<entry> batch;
        std::uint64_t batch_end = 0, batch_bytes = 0;
        std::optional<journal_error> sticky;
        {
            std::lock_guard lock(mu_);
            batch.swap(queue_);
            batch_end = queued_;
            for (const auto& e : batch) batch_bytes += e.bytes;
            sticky = error_;
        }
        std::optional<journal_error> failure;
        if (!batch.empty() && !sticky) {
            failure = apply(batch);
            if (failure && db_) db_->trouble = true;  // no seal: the next open checks the file
            last_commit_end_ = std::chrono::steady_clock::now();
        }
        bool close_now = !batch.empty() && std::holds_alternative<close_record>(batch.back().rec);
        if (close_now) close_connection();
        std::uint64_t records = batch.size();
        batch.clear();  // the captured streams leave memory before anyone is told

        std::vector<waiter> ready;
        std::optional<journal_error> error;
        bool closed = false, again = false;
        {
            std::lock_guard lock(mu_);
            if (failure && !error_) error_ = std::move(failure);
            committed_ = batch_end;
            queued_bytes_ -= std::min(queued_bytes_, batch_bytes);
            stats_.records += records;
            if (paced && records > 0 && !sticky && !failure) {
                ++stats_.paced_commits;
                if (busy) ++stats_.busy_paced_commits;
            }
            if (close_now) closed_ = true;
            while (!waiters_.empty() && waiters_.front().target <= committed_) {
                ready.push_back(std::move(waiters_.front()));
                waiters_.pop_front();
            }
            if (ready.size() >= 2)
                unpaced_left_ = 0;
            else if (paced && ready.size() == 1)
                unpaced_left_ = pace_probation;
            else if (!paced && unpaced_left_ > 0)
                --unpaced_left_;
            error = error_;
            closed = closed_;
            if (queue_.empty())
                posted_ = false;
            else
                again = true;
        }
        for (auto& w : ready) {
            std::optional<journal_error> e = error;
            if (!e && closed && w.after_close) e = closed_error();
            asio::dispatch(w.work, [h = std::move(w.handler), e = std::move(e)]() mutable {
                std::move(h)(std::move(e));
            });
        }
        if (again) schedule();
    }

    void close_connection() {
        if (!db_) return;
        // Statements first: a connection with live statements closes only when they go.
        for (statement* s :
             {&insert_run_, &insert_intent_, &update_handle_, &update_end_, &update_handle_end_,
              &insert_final_, &find_end_streams_, &update_run_end_, &insert_blob_, &delete_older_ranges_,
              &delete_finals_, &insert_unstarted_, &insert_documents_})
            *s = statement();
        run_dir_.reset();
        dropper_ = exec::cache_dropper();
        // A passive checkpoint moves what this run wrote into the database file; another
        // connection's readers may keep part of the WAL, which is fine.
        db_->conn.exec("PRAGMA wal_checkpoint(PASSIVE);");
        db_.reset();
    }

    std::optional<journal_error> apply(std::deque<entry>& batch) {
        if (!db_) return closed_error();
        auto& db = *db_;
        std::size_t applied = 0;
        files_written_ = false;
        last_end_.reset();
        merge_handles(batch);
        auto e = journal_detail::in_write_transaction(db, "recording", [&]() -> std::optional<journal_error> {
            for (auto& en : batch) {
                if (std::holds_alternative<close_record>(en.rec)) continue;
                ++applied;
                if (auto* h = std::get_if<attempt_handle>(&en.rec); h && merged_.count(key_of(*h))) continue;
                if (auto e = std::visit([&](auto& r) { return apply_record(r, en.ms); }, en.rec)) return e;
            }
            if (files_written_ && db.options.durability == journal_durability::full && run_dir_)
                if (int err = exec::sync_directory(run_dir_.get()); err != 0) return file_error(err, "");
            return std::nullopt;
        });
        merged_.clear();
        if (e) {
            // Nothing of this batch is in the database: forget what it allocated.
            run_seq_ = committed_run_seq_;
            return e;
        }
        committed_run_seq_ = run_seq_;
        segment_.store(segment_pending_, std::memory_order_release);
        std::lock_guard lock(mu_);
        ++stats_.commits;
        stats_.largest_batch = std::max<std::uint64_t>(stats_.largest_batch, applied);
        stats_.stream_bytes += batch_stream_bytes_;
        stats_.stream_files += batch_stream_files_;
        batch_stream_bytes_ = batch_stream_files_ = 0;
        return std::nullopt;
    }

    static std::uint64_t key_of(std::uint32_t task, std::uint32_t attempt) {
        return (static_cast<std::uint64_t>(task) << 32) | attempt;
    }
    template <typename R>
    static std::uint64_t key_of(const R& r) {
        return key_of(r.task_index, r.attempt);
    }

    // A handle whose attempt also ends in this batch is written by the end's statement: one
    // row update per attempt instead of two (a short task's handle and end usually arrive
    // together). The last handle of an attempt wins, as separate updates would have it.
    void merge_handles(std::deque<entry>& batch) {
        merged_.clear();
        std::unordered_map<std::uint64_t, const entry*> handles;
        for (const auto& en : batch) {
            if (const auto* h = std::get_if<attempt_handle>(&en.rec))
                handles[key_of(*h)] = &en;
            else if (const auto* a = std::get_if<attempt_end>(&en.rec))
                if (auto it = handles.find(key_of(*a)); it != handles.end())
                    merged_.emplace(it->first, it->second);
        }
    }

    // Every record but the run's own (recorded or claimed) goes into the run.
    template <typename Record>
    std::optional<journal_error> apply_record(Record& r, std::int64_t ms) {
        constexpr bool opens_run =
            std::is_same_v<Record, journal_run> || std::is_same_v<Record, claim_record>;
        if (!opens_run && !run_seq_) return no_run();
        return apply_one(r, ms);
    }

    // The statement cached in `s`, prepared from `sql` on its first use; `what` names the record in
    // an error.
    std::optional<journal_error> prepare(statement& s, std::string_view what, const char* sql) {
        int rc = SQLITE_OK;
        if (!s) s = db_->conn.prepare(sql, rc);
        if (!s) return db_->error(rc, what);
        return std::nullopt;
    }

    journal_error no_run() const {
        return journal_error{journal_errc::closed, "journal " + db_->path +
                                                       ": no run to record into (record_run or "
                                                       "async_claim first)"};
    }

    journal_error file_error(int err, const std::string& name) const {
        std::string where = name.empty() ? db_->streams_path : db_->streams_path + "/" + name;
        if (err == ENOSPC || err == EDQUOT)
            return journal_error{
                journal_errc::disk_full,
                "journal " + db_->path + ": the file system is full (writing " + where + ")"};
        if (err == EROFS)
            return journal_error{journal_errc::read_only, "journal " + db_->path + ": cannot write " + where +
                                                              ": " + exec::errno_text(err)};
        return journal_error{journal_errc::io_error, "journal " + db_->path + ": cannot write " + where +
                                                         ": " + exec::errno_text(err)};
    }

    journal_error step_error(std::string_view what) const { return db_->error(db_->last_rc(), what); }

    // How a stream is stored: inline, or (large) in a file written now, inside the
    // transaction that commits the row naming it.
    struct stored_stream {
        std::uint64_t length = 0;
        std::uint32_t crc = 0;
        std::string file;       // relative to the streams folder
        std::int64_t blob = 0;  // else the `streams` row holding the bytes
    };

    std::optional<journal_error> put_stream(std::string_view bytes, stored_stream& out) {
        out = stored_stream{};
        if (bytes.empty()) return std::nullopt;
        auto& db = *db_;
        out.length = bytes.size();
        out.crc = journal_detail::crc32c(bytes);
        batch_stream_bytes_ += bytes.size();
        if (bytes.size() < threshold_) {
            statement& s = insert_blob_;
            if (auto e = prepare(s, "recording a stream", sql::insert_blob)) return e;
            reset_guard guard(s);
            s.bind_blob(1, bytes);
            if (s.step() != SQLITE_DONE) return step_error("recording a stream");
            out.blob = sqlite3_last_insert_rowid(db.conn.get());
            return std::nullopt;
        }
        if (!run_dir_ || run_dir_seq_ != run_seq_) {
            if (int err = journal_detail::streams_dir(db, true); err != 0) return file_error(err, "");
            if (int err =
                    exec::open_directory(db.streams_dir.get(), std::to_string(run_seq_), true, run_dir_);
                err != 0)
                return file_error(err, std::to_string(run_seq_));
            run_dir_seq_ = run_seq_;
            if (db.options.durability == journal_durability::full) exec::sync_directory(db.streams_dir.get());
        }
        // Unique across resumes: a segment has one writer, and its counter only grows.
        std::string name = std::to_string(segment_pending_) + "-" + std::to_string(++file_counter_);
        out.file = std::to_string(run_seq_) + "/" + name;
        if (int err = exec::write_file(run_dir_.get(), name, bytes,
                                       db.options.durability == journal_durability::full, &dropper_);
            err != 0)
            return file_error(err, out.file);
        files_written_ = true;
        ++batch_stream_files_;
        return std::nullopt;
    }

    // LENGTH, CRC, FILE at `first`..`first + 2`, BLOB at `blob_col`.
    static void bind_stream(statement& s, int first, int blob_col, const stored_stream& st) {
        s.bind(first, st.length);
        if (st.length)
            s.bind(first + 1, static_cast<std::int64_t>(st.crc));
        else
            s.bind_null(first + 1);
        s.bind_nonempty(first + 2, st.file);
        if (st.blob)
            s.bind(blob_col, st.blob);
        else
            s.bind_null(blob_col);
    }

    std::optional<journal_error> apply_one(journal_run& r, std::int64_t ms) {
        statement& s = insert_run_;
        if (auto e = prepare(s, "recording the run", sql::insert_run)) return e;
        reset_guard guard(s);
        s.bind_from(1, r.run_id, r.workflow_name, r.workflow_path);
        s.bind_blob(4, std::string_view());  // the source and (8) the inputs: in run_documents
        s.bind_from(5, r.workflow_digest, r.plan_digest, r.base_dir, std::string_view(), r.argv_json,
                    r.options_json, r.agentctl_version, r.task_count, r.owner.host, r.owner.boot_id,
                    r.owner.pid, r.owner.start_time, ms);
        if (s.step() != SQLITE_DONE) {
            if (db_->last_rc() == SQLITE_CONSTRAINT_UNIQUE)
                return journal_error{journal_errc::run_exists, "journal " + db_->path + ": a run \"" +
                                                                   r.run_id + "\" is already recorded"};
            return step_error("recording the run");
        }
        run_seq_ = sqlite3_last_insert_rowid(db_->conn.get());
        segment_pending_ = 0;
        statement& d = insert_documents_;
        if (auto e = prepare(d, "recording the run", sql::insert_documents)) return e;
        reset_guard documents(d);
        d.bind(1, run_seq_);
        d.bind_blob(2, r.workflow_source);
        d.bind(3, r.inputs_json);
        if (d.step() != SQLITE_DONE) return step_error("recording the run");
        return std::nullopt;
    }

    std::optional<journal_error> apply_one(claim_record& c, std::int64_t) {
        auto r = journal_detail::claim_in_transaction(*db_, c.run_id, c.owner, c.alive);
        if (!r) return r.error();
        run_seq_ = r->first;
        segment_pending_ = r->second;
        return std::nullopt;
    }

    std::optional<journal_error> apply_one(attempt_intent& a, std::int64_t ms) {
        statement& s = insert_intent_;
        if (auto e = prepare(s, "recording an intent", sql::insert_intent)) return e;
        const std::string& argv = argv_json_.of(a.argv, journal_detail::encode_strings);
        const std::string& env = env_json_.of(a.env_names, journal_detail::encode_strings);
        const std::string& limits = limits_json_.of(a.limits, journal_detail::encode_object);
        reset_guard guard(s);
        s.bind_from(1, run_seq_, a.task_index, a.attempt, segment_pending_, a.task_id, ms, a.backend,
                    a.isolation, argv, env, a.cwd, limits);
        if (s.step() != SQLITE_DONE) return step_error("recording the intent of task " + a.task_id);
        return std::nullopt;
    }

    journal_error missing_attempt(std::string_view what, std::uint32_t task, std::uint32_t attempt) const {
        return journal_error{journal_errc::internal,
                             "journal " + db_->path + ": " + std::string(what) + " of task index " +
                                 std::to_string(task) + " attempt " + std::to_string(attempt) +
                                 ": no intent was recorded for it, or it already ended"};
    }

    std::optional<journal_error> apply_one(attempt_handle& h, std::int64_t ms) {
        statement& s = update_handle_;
        if (auto e = prepare(s, "recording a handle", sql::update_handle)) return e;
        reset_guard guard(s);
        bind_handle(s, 1, h, ms);
        s.bind_from(8, run_seq_, h.task_index, h.attempt);
        if (s.step() != SQLITE_DONE) return step_error("recording a handle");
        if (sqlite3_changes(db_->conn.get()) != 1)
            return missing_attempt("the handle", h.task_index, h.attempt);
        return std::nullopt;
    }

    // HANDLE_MS, PID, PID_START, CGROUP, CONTAINER, CONTAINER_ENGINE, SLURM_JOB_ID from `first`.
    static void bind_handle(statement& s, int first, const attempt_handle& h, std::int64_t ms) {
        s.bind_from(first, ms, h.pid, h.pid_start_time);
        s.bind_nonempty(first + 3, h.cgroup);
        s.bind_nonempty(first + 4, h.container);
        s.bind_nonempty(first + 5, h.container_engine);
        s.bind_nonempty(first + 6, h.slurm_job_id);
    }

    // The columns that results and attempts share: state, exit, duration, error.
    static void bind_outcome(statement& s, int first, const task_result& r) {
        s.bind_from(first, to_string(r.state), r.exit_code, r.signal, r.duration_ms);
        bind_error(s, first + 4, r.error);
    }

    // ERROR_CODE, ERROR_MESSAGE from `first`: NULL without an error.
    static void bind_error(statement& s, int first, const std::optional<task_error>& error) {
        if (error) {
            s.bind_from(first, to_string(error->code), error->message);
        } else {
            s.bind_null(first);
            s.bind_null(first + 1);
        }
    }

    // The end fills in the attempt's row in one statement: whole or not at all.
    std::optional<journal_error> apply_one(attempt_end& a, std::int64_t ms) {
        auto streams = journal_detail::streams_of(a.result);
        stored_stream out, err;
        if (auto e = put_stream(streams.out, out)) return e;
        if (auto e = put_stream(streams.err, err)) return e;
        auto merged = merged_.find(key_of(a));
        bool with_handle = merged != merged_.end();
        statement& s = with_handle ? update_handle_end_ : update_end_;
        if (auto e = prepare(s, "recording an end", with_handle ? sql::update_handle_end : sql::update_end))
            return e;
        std::string json = journal_detail::encode_result(a.result);
        reset_guard guard(s);
        s.bind(1, ms);
        bind_outcome(s, 2, a.result);
        s.bind_from(8, a.cleanup_failed, json);
        bind_stream(s, 10, 16, out);
        bind_stream(s, 13, 17, err);
        int where = 18;
        if (with_handle) {
            bind_handle(s, 18, std::get<attempt_handle>(merged->second->rec), merged->second->ms);
            where = 25;
        }
        s.bind_from(where, run_seq_, a.task_index, a.attempt);
        if (s.step() != SQLITE_DONE)
            return step_error("recording the end of task index " + std::to_string(a.task_index) +
                              " attempt " + std::to_string(a.attempt));
        if (sqlite3_changes(db_->conn.get()) != 1) return missing_attempt("the end", a.task_index, a.attempt);
        last_end_ = recorded_end{a.task_index, a.attempt, out.length, err.length, std::move(json), &a.result};
        return std::nullopt;
    }

    std::optional<journal_error> apply_one(task_final& f, std::int64_t ms) {
        stored_stream out, err;
        bool from_attempt = false;
        // The result's JSON, or "" when it is byte for byte that of the end named by
        // streams_attempt: stored once (docs/JOURNAL.md, "results").
        std::string json = journal_detail::encode_result(f.result);
        if (f.streams_attempt && last_end_ && last_end_->task_index == f.task_index &&
            last_end_->attempt == *f.streams_attempt) {
            // record_end_and_final: the end was applied just before, in this transaction.
            out.length = last_end_->stdout_length;
            err.length = last_end_->stderr_length;
            from_attempt = true;
            if (json == last_end_->json) json.clear();
        } else if (f.streams_attempt) {
            statement& q = find_end_streams_;
            if (auto e = prepare(q, "recording a result", sql::find_end_streams)) return e;
            reset_guard guard(q);
            q.bind_from(1, run_seq_, f.task_index, *f.streams_attempt);
            int rc = q.step();
            if (rc == SQLITE_ROW) {
                out.length = q.uint64(0);
                err.length = q.uint64(1);
                from_attempt = true;
                if (json == q.text(2)) json.clear();
            } else if (rc != SQLITE_DONE) {
                return step_error("recording a result");
            }
        }
        if (!from_attempt) {  // no such end: the result's own streams
            auto streams = journal_detail::streams_of(f.result);
            if (auto e = put_stream(streams.out, out)) return e;
            if (auto e = put_stream(streams.err, err)) return e;
        }
        std::optional<std::uint32_t> streams_attempt;
        if (from_attempt) streams_attempt = *f.streams_attempt;
        return insert_final(f.task_index, f.task_id, f.result, f.reused, streams_attempt, out, err, json, ms);
    }

    // The final of record_end_and_final(end, task_id): the end applied just before, in this
    // transaction, is its result, JSON and streams; stored as '' (the end's JSON, docs/JOURNAL.md,
    // "results"), with nothing encoded or copied again.
    std::optional<journal_error> apply_one(final_of_end& f, std::int64_t ms) {
        if (!last_end_ || !last_end_->result || last_end_->task_index != f.task_index ||
            last_end_->attempt != f.attempt)
            return missing_attempt("the final", f.task_index, f.attempt);
        stored_stream out, err;
        out.length = last_end_->stdout_length;
        err.length = last_end_->stderr_length;
        return insert_final(f.task_index, f.task_id, *last_end_->result, false, f.attempt, out, err, {}, ms);
    }

    // A results row. `streams_attempt`: the streams are that attempt's (only their lengths are
    // here), else `out` and `err` are stored ones.
    std::optional<journal_error> insert_final(std::uint32_t task_index, const std::string& task_id,
                                              const task_result& result, bool reused,
                                              std::optional<std::uint32_t> streams_attempt,
                                              const stored_stream& out, const stored_stream& err,
                                              const std::string& json, std::int64_t ms) {
        statement& s = insert_final_;
        if (auto e = prepare(s, "recording a result", sql::insert_final)) return e;
        reset_guard guard(s);
        s.bind_from(1, run_seq_, task_index, task_id, segment_pending_, ms);
        bind_outcome(s, 6, result);
        s.bind_from(12, result.attempts, reused);
        if (streams_attempt) {
            s.bind(14, *streams_attempt);
            s.bind(16, out.length);  // the lengths, for listings; the bytes stay with the attempt
            s.bind(19, err.length);
        } else {
            s.bind_null(14);
            bind_stream(s, 16, 22, out);
            bind_stream(s, 19, 23, err);
        }
        s.bind(15, json);
        if (s.step() != SQLITE_DONE) return step_error("recording the result of task " + task_id);
        return std::nullopt;
    }

    // One row per range (docs/JOURNAL.md, "unstarted"), in place of what earlier segments
    // recorded: these tasks' finals (as a final's INSERT OR REPLACE replaces one) and every
    // earlier range. Every task the segment did not leave unstarted has a row by now, so the
    // ranges of a run never overlap, and a task's final is its row, else the range holding it.
    std::optional<journal_error> apply_one(unstarted_tasks& u, std::int64_t ms) {
        const char* what = "recording unstarted tasks";
        statement& older = delete_older_ranges_;
        if (auto e = prepare(older, what, sql::delete_older_ranges)) return e;
        {
            reset_guard guard(older);
            older.bind_from(1, run_seq_, segment_pending_);
            if (older.step() != SQLITE_DONE) return step_error(what);
        }
        statement& finals = delete_finals_;
        if (auto e = prepare(finals, what, sql::delete_finals)) return e;
        statement& insert = insert_unstarted_;
        if (auto e = prepare(insert, what, sql::insert_unstarted)) return e;
        const std::string json = journal_detail::encode_result(u.result);
        for (const auto& [first, end] : u.ranges) {
            {
                reset_guard guard(finals);
                finals.bind_from(1, run_seq_, first, end);
                if (finals.step() != SQLITE_DONE) return step_error(what);
            }
            reset_guard guard(insert);
            insert.bind_from(1, run_seq_, first, end, segment_pending_, ms, to_string(u.result.state), json);
            if (insert.step() != SQLITE_DONE)
                return step_error("recording unstarted tasks " + std::to_string(first) + " to " +
                                  std::to_string(end - 1));
        }
        return std::nullopt;
    }

    std::optional<journal_error> apply_one(journal_run_end& r, std::int64_t ms) {
        std::optional<journal_error> error;
        std::string counts = journal_detail::counts_json_of(*db_, run_seq_, error);
        if (error) return error;
        statement& s = update_run_end_;
        if (auto e = prepare(s, "recording the run's end", sql::update_run_end)) return e;
        reset_guard guard(s);
        s.bind_from(1, to_string(r.state), ms, r.duration_ms);
        bind_error(s, 4, r.error);
        s.bind_from(6, counts, run_seq_);
        if (s.step() != SQLITE_DONE) return step_error("recording the run's end");
        return std::nullopt;
    }

    std::optional<journal_error> apply_one(close_record&, std::int64_t) { return std::nullopt; }

    asio::any_io_executor ex_;
    // A strand of the caller's worker: drains and the pacing timer never run concurrently,
    // even on a pool of several threads.
    asio::any_io_executor worker_;

    // Shared between the callers and the worker, under mu_.
    mutable std::mutex mu_;
    std::deque<entry> queue_;
    std::deque<waiter> waiters_;
    std::uint64_t queued_ = 0;     // records ever queued
    std::uint64_t committed_ = 0;  // records ever taken by a finished drain
    std::uint64_t queued_bytes_ = 0;
    std::uint64_t peak_queued_bytes_ = 0;
    bool posted_ = false;   // a drain is scheduled or running
    bool closing_ = false;  // a close is queued: later records are dropped
    bool closed_ = false;
    std::optional<journal_error> error_;  // sticky
    std::uint64_t in_flight_ = 0;         // attempts whose intent is queued and end is not yet
    bool pacing_armed_ = false;           // a paced wait is pending
    std::uint32_t unpaced_left_ = 0;      // commits not to pace: waiting answered one waiter
    journal_writer_stats stats_;
    std::atomic<std::uint32_t> segment_{0};

    // The worker's own.
    std::unique_ptr<journal_db> db_;
    journal_writer_options options_;
    std::size_t threshold_ = 64 * 1024;
    std::int64_t run_seq_ = 0;            // the run recorded into (0: none yet)
    std::int64_t committed_run_seq_ = 0;  // run_seq_ as of the last commit
    std::uint32_t segment_pending_ = 0;
    exec::unique_fd run_dir_;
    exec::cache_dropper dropper_;  // the stream files leave the page cache once on disk
    std::int64_t run_dir_seq_ = 0;
    std::uint64_t file_counter_ = 0;
    bool files_written_ = false;
    std::uint64_t batch_stream_bytes_ = 0;
    std::uint64_t batch_stream_files_ = 0;
    asio::steady_timer pacing_;
    std::chrono::steady_clock::time_point last_commit_end_{};
    std::chrono::steady_clock::time_point idle_sampled_{};
    bool cpus_busy_ = false;
    std::optional<exec::cpu_idle_meter> idle_meter_;  // unless options_.cpu_idle
    struct recorded_end {
        std::uint32_t task_index = 0, attempt = 0;
        std::uint64_t stdout_length = 0, stderr_length = 0;
        std::string json;                     // its result_json
        const task_result* result = nullptr;  // in the batch, alive until the transaction ends
    };
    // The children of one action share their argv (but for templated args), environment
    // names and limits: an intent's JSON is encoded again only when it differs from the last.
    template <typename T>
    struct last_encoded {
        std::optional<T> value;
        std::string json;
        template <typename Encode>
        const std::string& of(const T& v, Encode encode) {
            if (!value || *value != v) {
                json = encode(v);
                value = v;
            }
            return json;
        }
    };
    last_encoded<std::vector<std::string>> argv_json_, env_json_;
    last_encoded<boost::json::object> limits_json_;
    std::optional<recorded_end> last_end_;                    // the end applied last in this transaction
    std::unordered_map<std::uint64_t, const entry*> merged_;  // handles the batch's ends write
    statement insert_run_, insert_intent_, update_handle_, update_end_, update_handle_end_, insert_final_,
        find_end_streams_, update_run_end_, insert_blob_, delete_older_ranges_, delete_finals_,
        insert_unstarted_, insert_documents_;
};

void journal_async_sync(journal_writer_impl& w, sync_handler h) {
    w.sync(std::move(h), false);
}

void journal_async_claim(journal_writer_impl& w, std::string run_id, journal_owner owner,
                         owner_alive_fn alive, sync_handler h) {
    w.claim(claim_record{std::move(run_id), std::move(owner), std::move(alive)}, std::move(h));
}

void journal_async_close(journal_writer_impl& w, sync_handler h) {
    w.sync(std::move(h), true);
}

}  // namespace detail

journal_writer::journal_writer(asio::any_io_executor ex, asio::any_io_executor worker, journal db,
                               journal_writer_options options)
    : impl_(std::make_shared<detail::journal_writer_impl>(std::move(ex), std::move(worker), std::move(db),
                                                          options)) {}

journal_writer::~journal_writer() {
    if (impl_) impl_->release();
}

bool journal_writer::record_run(journal_run run) {
    std::uint64_t bytes = sizeof run + run.workflow_source.size() + run.inputs_json.size();
    return impl_->push(std::move(run), bytes);
}

bool journal_writer::record_intent(attempt_intent intent) {
    std::uint64_t bytes = sizeof intent;
    for (const auto& a : intent.argv) bytes += a.size();
    return impl_->push(std::move(intent), bytes);
}

bool journal_writer::record_handle(attempt_handle handle) {
    return impl_->push(std::move(handle), sizeof handle);
}

bool journal_writer::record_end(attempt_end end) {
    std::uint64_t bytes = detail::bytes_of(end.result);
    return impl_->push(std::move(end), bytes);
}

bool journal_writer::record_final(task_final final) {
    std::uint64_t bytes = detail::bytes_of(final.result);
    return impl_->push(std::move(final), bytes);
}

bool journal_writer::record_end_and_final(attempt_end end, task_final final) {
    std::uint64_t end_bytes = detail::bytes_of(end.result), final_bytes = detail::bytes_of(final.result);
    return impl_->push_pair(std::move(end), end_bytes, std::move(final), final_bytes);
}

bool journal_writer::record_end_and_final(attempt_end end, std::string task_id) {
    std::uint64_t end_bytes = detail::bytes_of(end.result);
    detail::final_of_end final{end.task_index, end.attempt, std::move(task_id)};
    std::uint64_t final_bytes = sizeof final + final.task_id.size();
    return impl_->push_pair(std::move(end), end_bytes, std::move(final), final_bytes);
}

bool journal_writer::record_unstarted(unstarted_tasks tasks) {
    std::uint64_t bytes = sizeof tasks + tasks.ranges.size() * sizeof tasks.ranges.front();
    return impl_->push(std::move(tasks), bytes);
}

bool journal_writer::record_run_end(journal_run_end end) {
    return impl_->push(std::move(end), sizeof end);
}

journal_writer_stats journal_writer::stats() const {
    return impl_->stats();
}

std::uint32_t journal_writer::segment() const {
    return impl_->segment();
}

}  // namespace agentctl
