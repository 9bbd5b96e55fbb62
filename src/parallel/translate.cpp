// GNU parallel's command line → jobs → one workflow: a foreach over the jobs of one process
// action, `failure: continue`, `approval: never`, the command's program the only one allowed
// (docs/PARALLEL.md, "The workflow").
#include "parallel/parallel_detail.hpp"

#include <agentctl/json.hpp>
#include <agentctl/template.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <regex>
#include <set>

namespace agentctl {

using piece = parallel_template::piece;

std::vector<std::string> split_parallel_input(std::string_view data, const parallel_request& request) {
    std::string_view end = request.separator == parallel_request::separator_t::nul ? std::string_view("\0", 1)
                           : request.separator == parallel_request::separator_t::line ? std::string_view("\n")
                                                                                      : request.delimiter;
    std::vector<std::string> values;
    while (!data.empty()) {
        auto at = end.empty() ? std::string_view::npos : data.find(end);
        values.emplace_back(data.substr(0, at));
        data.remove_prefix(at == std::string_view::npos ? data.size() : at + end.size());
    }
    return values;
}

std::optional<std::string> parse_parallel_delimiter(std::string_view text, std::string& error) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\\' || i + 1 == text.size()) {
            out += text[i];
            continue;
        }
        const char c = text[++i];
        auto digits = [&](int base, std::size_t most) {
            std::size_t n = 0;
            int value = 0;
            while (n < most && i + 1 < text.size()) {
                char d = text[i + 1];
                int v = d >= '0' && d <= '9'                 ? d - '0'
                        : base == 16 && d >= 'a' && d <= 'f' ? d - 'a' + 10
                        : base == 16 && d >= 'A' && d <= 'F' ? d - 'A' + 10
                                                             : -1;
                if (v < 0 || v >= base) break;
                value = value * base + v;
                ++i;
                ++n;
            }
            return n ? std::optional<char>(static_cast<char>(value)) : std::nullopt;
        };
        switch (c) {
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case '\\':
                out += '\\';
                break;
            case 'x':
                if (auto v = digits(16, 2)) {
                    out += *v;
                    break;
                }
                error = "-d " + std::string(text) + ": \\x needs hexadecimal digits";
                return std::nullopt;
            default:
                if (c >= '0' && c <= '7') {
                    --i;
                    out += *digits(8, 3);
                    break;
                }
                out += '\\';
                out += c;
        }
    }
    if (out.empty()) {
        error = "-d needs a delimiter";
        return std::nullopt;
    }
    return out;
}

std::vector<std::string> parallel_environment(const std::vector<std::string>& names,
                                              const std::vector<std::string>& extra) {
    std::set<std::string> out;
    for (const auto& n : names)
        if (n == "PATH" || n == "HOME" || n == "LANG" || n == "TMPDIR" || n == "TERM" ||
            n.rfind("LC_", 0) == 0)
            out.insert(n);
    for (const auto& n : extra)
        if (std::find(names.begin(), names.end(), n) != names.end()) out.insert(n);
    return {out.begin(), out.end()};
}

bool parallel_translation::uses_slot() const {
    return line.uses(piece::kind_t::slot) || (tag && tag->uses(piece::kind_t::slot));
}

std::string parallel_translation::results_dir(std::size_t i) const {
    return results_dir_of(jobs[i]);
}

std::string parallel_translation::results_dir_of(const parallel_job& job) const {
    if (!results) return "";
    // parallel's args_as_dirname(): each position's name and value, sorted by the name
    // (numerically, then as text), with \ \t NUL and / quoted as \\ \t \0 \_ and each
    // part cut to a file name's length.
    // Perl's numeric value of a string: its leading number, else 0.
    auto number = [](std::string_view s) {
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
        if (!s.empty() && s.front() == '+') s.remove_prefix(1);
        double v = 0;
        std::from_chars(s.data(), s.data() + s.size(), v);
        return v;
    };
    std::vector<std::size_t> order(job.args.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    auto name = [&](std::size_t k) {
        return k < position_names.size() ? position_names[k] : std::to_string(k + 1);
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        double na = number(name(a)), nb = number(name(b));
        return na != nb ? na < nb : name(a) < name(b);
    });
    std::string out = *results;
    for (std::size_t k : order) {
        std::string value;
        for (char c : job.args[k]) {
            if (c == '\\')
                value += "\\\\";
            else if (c == '\t')
                value += "\\t";
            else if (c == '\0')
                value += "\\0";
            else if (c == '/')
                value += "\\_";
            else
                value += c;
        }
        if (value.size() > 255) value.resize(255);
        out += "/" + name(k) + "/" + value;
    }
    return out;
}

namespace {

constexpr char slot_mark = '\x01';  // stands for {%} until the engine knows the slot

std::string yaml_string(std::string_view s) {
    return boost::json::serialize(boost::json::string(s));
}

struct jobs_result {
    std::vector<parallel_job> jobs;
    std::vector<std::string> names;  ///< --header: each position's name
    std::string error;
};

// Each source's values (split into columns with --colsep), crossed source by source, the last
// one fastest; linked sources (`:::+`) go value by value with the one before them.
jobs_result make_jobs(const parallel_request& request, const parallel_context& context) {
    jobs_result out;
    std::optional<std::regex> colsep;
    if (request.colsep) {
        try {
            colsep.emplace(*request.colsep, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
            out.error = "--colsep " + *request.colsep + ": not a regular expression (" + e.what() + ")";
            return out;
        }
    }
    // Perl's split with a limit of -1: every field, trailing empty ones too; none of "".
    auto columns = [&](const std::string& value) {
        std::vector<std::string> cols;
        if (!colsep) {
            cols.push_back(value);
            return cols;
        }
        if (value.empty()) return cols;
        std::size_t at = 0;
        for (std::sregex_iterator it(value.begin(), value.end(), *colsep), end; it != end; ++it) {
            if (it->length(0) == 0) continue;
            cols.push_back(value.substr(at, static_cast<std::size_t>(it->position(0)) - at));
            at = static_cast<std::size_t>(it->position(0) + it->length(0));
        }
        cols.push_back(value.substr(at));
        return cols;
    };
    std::vector<std::vector<std::vector<std::string>>> sources;  // source → value → columns
    for (std::size_t s = 0; s < context.values.size(); ++s) {
        std::vector<std::vector<std::string>> values;
        for (const auto& v : context.values[s]) values.push_back(columns(v));
        if (request.header) {
            if (values.empty()) {
                out.error = "--header: input source " + std::to_string(s + 1) + " has no header";
                return out;
            }
            for (auto& name : values.front()) out.names.push_back(std::move(name));
            values.erase(values.begin());
        }
        sources.push_back(std::move(values));
    }
    // Of several sources, one without values is one empty value, unless all are empty (then
    // there is no job): parallel's nest_get() fills a missing first value with "".
    if (std::any_of(sources.begin(), sources.end(), [](const auto& v) { return !v.empty(); }))
        for (auto& values : sources)
            if (values.empty()) values.push_back({std::string()});
    // --link: every source linked value by value, the shorter ones starting over (parallel's
    // link_get() recycles them), as many jobs as the longest has values.
    if (request.link) {
        std::size_t longest = 0;
        for (const auto& values : sources) longest = std::max(longest, values.size());
        if (longest > 1000000) {
            out.error =
                "the input sources make more than 1000000 jobs: agentctl runs at most 1000000 in one run";
            return out;
        }
        out.jobs.reserve(longest);
        for (std::size_t n = 0; n < longest; ++n) {
            parallel_job job;
            job.seq = static_cast<std::uint32_t>(n + 1);
            for (const auto& values : sources) {
                const auto& columns_of_value = values[n % values.size()];
                job.args.insert(job.args.end(), columns_of_value.begin(), columns_of_value.end());
            }
            out.jobs.push_back(std::move(job));
        }
        return out;
    }
    // Groups of linked sources, each a list of rows (a row: the columns of its sources).
    std::vector<std::vector<std::vector<std::string>>> groups;
    for (std::size_t s = 0; s < sources.size(); ++s) {
        bool linked = s > 0 && s < request.sources.size() && request.sources[s].linked;
        if (!linked) {
            groups.emplace_back();
            for (auto& v : sources[s]) groups.back().push_back(std::move(v));
            continue;
        }
        auto& rows = groups.back();
        rows.resize(std::min(rows.size(), sources[s].size()));
        for (std::size_t r = 0; r < rows.size(); ++r)
            rows[r].insert(rows[r].end(), sources[s][r].begin(), sources[s][r].end());
    }
    std::size_t total = groups.empty() ? 0 : 1;
    for (const auto& g : groups) {
        if (g.empty()) return out;
        if (total > 1000000 / g.size()) {
            out.error =
                "the input sources make more than 1000000 jobs: agentctl runs at most 1000000 in one run";
            return out;
        }
        total *= g.size();
    }
    out.jobs.reserve(total);
    std::vector<std::size_t> at(groups.size(), 0);
    for (std::size_t n = 0; n < total; ++n) {
        parallel_job job;
        job.seq = static_cast<std::uint32_t>(n + 1);
        for (std::size_t g = 0; g < groups.size(); ++g)
            job.args.insert(job.args.end(), groups[g][at[g]].begin(), groups[g][at[g]].end());
        out.jobs.push_back(std::move(job));
        for (std::size_t g = groups.size(); g-- > 0;) {
            if (++at[g] < groups[g].size()) break;
            at[g] = 0;
        }
    }
    return out;
}

// The command line as parallel composes it: the words joined by spaces with the values
// quoted, or (-q) each word quoted as a whole; an implied ` {}` when there is no replacement
// string; without a command, each job's values are its command line.
std::optional<parallel_template> line_template(const parallel_request& request,
                                               const std::vector<std::string>& names, std::string& error) {
    parallel_template t;
    if (request.command.empty()) {
        t.words.push_back({piece{piece::kind_t::value, "", 0}});
        return t;
    }
    t.quote_words = request.quote;
    if (request.quote) {
        for (const auto& w : request.command) {
            t.words.push_back(parallel_detail::parse_pieces(w, false, names, error));
            if (!error.empty()) return std::nullopt;
        }
    } else {
        std::string joined;
        for (const auto& w : request.command) joined += (joined.empty() ? "" : " ") + w;
        t.words.push_back(parallel_detail::parse_pieces(joined, true, names, error));
        if (!error.empty()) return std::nullopt;
    }
    bool any = false;
    for (const auto& w : t.words)
        for (const auto& p : w) any = any || p.kind != piece::kind_t::text;
    if (!any) {
        piece all{piece::kind_t::value, "", 0};
        if (request.quote) {
            t.words.push_back({all});
        } else {
            all.quoted = true;
            t.words.back().push_back(piece{piece::kind_t::text, " ", 0});
            t.words.back().push_back(all);
        }
    }
    return t;
}

// What a `${{ }}` template of the workflow must say for one argument of every job: the same
// literal text, or a value of each job's item (split where `{%}` goes).
struct argument_plan {
    bool varies = false;
    std::size_t slots = 0;  ///< `{%}` occurrences: the item holds slots + 1 parts
};

std::string field(std::size_t arg, std::size_t part, const argument_plan& a) {
    return "arg" + std::to_string(arg) + (a.slots ? "_" + std::to_string(part) : "");
}

std::vector<std::string> split_at_mark(const std::string& s) {
    std::vector<std::string> parts(1);
    for (char c : s) {
        if (c == slot_mark)
            parts.emplace_back();
        else
            parts.back() += c;
    }
    return parts;
}

// `./tool.sh` or `bin/tool` against the current folder, `.` and `..` resolved as text (no
// file is looked at: the engine resolves and checks the program when a job starts).
std::string absolute_program(const std::string& word, const std::string& cwd) {
    if (word.find('/') == std::string::npos || word.front() == '/') return word;
    std::vector<std::string> parts;
    std::string path = cwd + "/" + word;
    for (std::size_t at = 0; at <= path.size();) {
        auto slash = path.find('/', at);
        if (slash == std::string::npos) slash = path.size();
        std::string part = path.substr(at, slash - at);
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(std::move(part));
        }
        at = slash + 1;
    }
    std::string out;
    for (const auto& p : parts) out += "/" + p;
    return out.empty() ? "/" : out;
}

std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    std::string s = buf;
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
}

}  // namespace

parallel_translation translate_parallel(const parallel_request& request, const parallel_context& context) {
    parallel_translation out;
    auto fail = [&](std::string message) {
        parallel_translation failed;
        failed.error = std::move(message);
        return failed;
    };
    if (request.command.empty() && !request.shell)
        return fail(
            "no command: each input line is then a command line, which needs a shell: add --shell "
            "(agentctl parallel --shell < jobs.txt)");
    if (request.resume && request.resume_failed)
        return fail("--resume and --resume-failed exclude each other");
    if (request.timeout_seconds && !(*request.timeout_seconds >= 0.001 && *request.timeout_seconds <= 86400))
        return fail("--timeout must be between 0.001 and 86400 seconds");
    if (request.retries < 0 || request.retries > 20) return fail("--retries must be between 0 and 20");
    // -u keeps nothing, so nothing can be written to files or tagged afterwards.
    if (request.ungroup && request.results)
        return fail(
            "-u and --results exclude each other: -u passes each job's output straight through and keeps "
            "none of it, --results writes it to files from the journal");
    if (request.ungroup && request.tagstring)
        return fail(
            "-u and --tag/--tagstring exclude each other: -u passes each job's output straight through, "
            "so there is no line to put a tag before (leave out -u)");
    if (request.ungroup && request.container_image)
        return fail(
            "-u is not available with --container: a container's output reaches agentctl through the "
            "engine's client, not agentctl's own stdout (leave out -u)");

    jobs_result made = make_jobs(request, context);
    if (!made.error.empty()) return fail(made.error);
    std::string error;
    auto line = line_template(request, made.names, error);
    if (!line) return fail(error);
    out.line = std::move(*line);
    if (request.tagstring) {
        parallel_template tag;
        tag.words.push_back(parallel_detail::parse_pieces(*request.tagstring, false, made.names, error));
        if (!error.empty()) return fail(error);
        out.tag = std::move(tag);
    }
    out.position_names = made.names;
    out.results = request.results;

    // --resume: what the joblog says ran (or succeeded) does not run again, nor (--resume with
    // --results) a job whose folder holds its output.
    std::vector<std::uint32_t> done;
    const bool by_results = request.resume && request.results && context.has_results;
    if ((request.resume || request.resume_failed) && context.joblog) {
        auto listed = parallel_joblog_done(*context.joblog, request.resume_failed, error);
        if (!listed) return fail("--joblog: " + error);
        done = std::move(*listed);
    }
    for (auto& job : made.jobs) {
        if (std::binary_search(done.begin(), done.end(), job.seq) ||
            (by_results && context.has_results(out.results_dir_of(job))))
            ++out.skipped;
        else
            out.jobs.push_back(std::move(job));
    }

    auto jobs = parse_parallel_jobs(request.jobs, std::max(context.cores, 1), out.jobs.size(), error);
    if (!jobs) return fail(error);
    out.jobs_at_once = *jobs;
    for (const auto& name : request.env) {
        bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name.front())) &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                     });
        if (!valid) return fail("--env " + name + ": not a variable name");
        if (std::find(context.environment_names.begin(), context.environment_names.end(), name) ==
            context.environment_names.end())
            return fail("--env " + name + ": " + name + " is not set in agentctl's environment");
    }
    out.environment = parallel_environment(context.environment_names, request.env);
    // In a container the image's own PATH, HOME and TMPDIR apply: agentctl never sets them
    // there (they steer the engine client, docs/DESIGN.md "Containers").
    if (request.container_image)
        std::erase_if(out.environment, [&](const std::string& n) {
            return (n == "PATH" || n == "HOME" || n == "TMPDIR") &&
                   std::find(request.env.begin(), request.env.end(), n) == request.env.end();
        });

    // Each job's argv, exactly as parallel's shell would read its command line; `{%}` is
    // a mark until the engine knows the slot.
    const bool slot = out.line.uses(piece::kind_t::slot);
    if (slot && request.quote && request.shell)
        return fail("{%} with -q and --shell is not supported: drop -q and quote the command yourself");
    auto argv_of = [&](const parallel_job& job) -> std::optional<std::vector<std::string>> {
        std::string text = parallel_detail::fill_template(out.line, job, std::string(1, slot_mark));
        if (request.shell) return std::vector<std::string>{"sh", "-c", std::move(text)};
        if (request.quote) {
            std::vector<std::string> words;
            for (const auto& w : out.line.words) {
                parallel_template one;
                one.words.push_back(w);
                words.push_back(parallel_detail::fill_template(one, job, std::string(1, slot_mark)));
            }
            return words;
        }
        return parallel_detail::shell_words(text, error);
    };
    std::vector<std::vector<std::string>> argvs;
    argvs.reserve(out.jobs.size());
    for (const auto& job : out.jobs) {
        if (slot)
            for (const auto& a : job.args)
                if (a.find(slot_mark) != std::string::npos)
                    return fail("job " + std::to_string(job.seq) +
                                ": a value holds the byte 0x01, which {%} cannot use");
        auto argv = argv_of(job);
        if (!argv) return fail(error);
        if (argv->empty()) return fail("job " + std::to_string(job.seq) + ": the command line is empty");
        argvs.push_back(std::move(*argv));
    }
    // The program and the number of arguments are the workflow's, the same for every job.
    parallel_job none;
    none.seq = 1;
    std::vector<std::string> shape =
        argvs.empty() ? argv_of(none).value_or(std::vector<std::string>{}) : argvs.front();
    if (shape.empty()) return fail(error.empty() ? "the command line is empty" : error);
    for (std::size_t j = 0; j < argvs.size(); ++j) {
        if (argvs[j].front() != shape.front())
            return fail(
                "the program differs between jobs (`" + shape.front() + "`, then `" + argvs[j].front() +
                "`): agentctl allows one program per run; use --shell to run each command line through sh");
        if (argvs[j].size() != shape.size())
            return fail("job " + std::to_string(out.jobs[j].seq) + " has " +
                        std::to_string(argvs[j].size() - 1) + " arguments where job " +
                        std::to_string(out.jobs.front().seq) + " has " + std::to_string(shape.size() - 1) +
                        " (a value that is empty or missing makes no word): use --shell to run each command "
                        "line through sh, as GNU parallel does");
    }
    if (shape.front().find(slot_mark) != std::string::npos || looks_templated(shape.front()))
        return fail("the program must be a fixed name, not a replacement string: use --shell");
    out.program = request.shell ? "sh" : absolute_program(shape.front(), context.working_directory);
    std::vector<argument_plan> plans(shape.size());
    for (std::size_t k = 1; k < shape.size(); ++k) {
        plans[k].slots = static_cast<std::size_t>(std::count(shape[k].begin(), shape[k].end(), slot_mark));
        plans[k].varies = plans[k].slots > 0 || looks_templated(shape[k]);
        for (std::size_t j = 1; j < argvs.size() && !plans[k].varies; ++j)
            plans[k].varies = argvs[j][k] != shape[k];
    }

    // inputs.jobs: one item per job, {seq, argK...}, given as an input (a document holds at
    // most 1 MiB; the jobs may be more).
    boost::json::array items;
    items.reserve(out.jobs.size());
    for (std::size_t j = 0; j < out.jobs.size(); ++j) {
        boost::json::object item;
        item["seq"] = out.jobs[j].seq;
        for (std::size_t k = 1; k < shape.size(); ++k) {
            if (!plans[k].varies) continue;
            auto parts = split_at_mark(argvs[j][k]);
            if (parts.size() != plans[k].slots + 1)
                return fail("job " + std::to_string(out.jobs[j].seq) +
                            ": a value holds the byte 0x01, which {%} cannot use");
            for (std::size_t p = 0; p < parts.size(); ++p) {
                if (!is_valid_utf8(parts[p]))
                    return fail("job " + std::to_string(out.jobs[j].seq) +
                                ": its command line is not valid UTF-8 (agentctl's workflows hold text)");
                item[field(k, p, plans[k])] = parts[p];
            }
        }
        items.emplace_back(std::move(item));
    }
    out.jobs_input = boost::json::serialize(items);
    std::string head =
        "# The workflow of an `agentctl parallel` command line (docs/PARALLEL.md): one process action,\n"
        "# one foreach task over the jobs. Run it with `agentctl run FILE`.\n"
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata:\n  name: parallel\nspec:\n  inputs:\n    "
        "jobs:";
    std::string y;
    y += "  policy:\n    workspaceRoot: " + yaml_string(context.working_directory) + "\n";
    y += "    processAllowlist: [" + yaml_string(out.program.substr(out.program.rfind('/') + 1)) + "]\n";
    y += "    environmentAllowlist: [";
    for (std::size_t i = 0; i < out.environment.size(); ++i) y += (i ? ", " : "") + out.environment[i];
    y += "]\n    approval: never\n";
    // A timeout or a cancellation sends SIGTERM first, as parallel does, and SIGKILL a second later.
    y +=
        "  runtime:\n    maxConcurrency: " + std::to_string(out.jobs_at_once) + "\n    killGraceSeconds: 1\n";
    y += "  actions:\n    job:\n      kind: builtin.shell.exec\n      command: " + yaml_string(out.program) +
         "\n";
    y += "      args: [";
    for (std::size_t k = 1; k < shape.size(); ++k) {
        std::string arg;
        if (!plans[k].varies) {
            arg = shape[k];
        } else {
            for (std::size_t p = 0; p <= plans[k].slots; ++p)
                arg += (p ? "${{ vars.jobSlot }}" : "") + std::string("${{ vars.job.") +
                       field(k, p, plans[k]) + " }}";
        }
        if (!is_valid_utf8(arg))
            return fail("the command is not valid UTF-8 (agentctl's workflows hold text)");
        y += (k > 1 ? ", " : "") + yaml_string(arg);
    }
    y += "]\n";
    if (!out.environment.empty()) {
        y += "      env:\n";
        for (const auto& name : out.environment)
            y += "        " + name + ": {env: " + name + ", secret: false}\n";
    }
    // Without --timeout a job may run as long as agentctl allows any task to: a day.
    y += "      timeoutSeconds: " +
         (request.timeout_seconds ? number_text(*request.timeout_seconds) : "86400") + "\n";
    if (request.container_image)
        y += "      isolation: container\n      container:\n        image: " +
             yaml_string(*request.container_image) + "\n";
    y += "  tasks:\n    - id: job\n      uses: action:job\n      failure: continue\n";
    if (request.retries > 1)
        y += "      retry: {maxAttempts: " + std::to_string(request.retries) +
             ", on: [spawn_error, exit_nonzero, timeout]}\n";
    y += "      foreach: {items: \"${{ inputs.jobs }}\", as: job, maxItems: " +
         std::to_string(std::max<std::size_t>(out.jobs.size(), 1)) + "}\n";
    out.workflow = head + " []\n" + y;
    out.printed_workflow = head + (items.empty() ? " []\n" : "\n");
    for (const auto& item : items) out.printed_workflow += "      - " + boost::json::serialize(item) + "\n";
    out.printed_workflow += y;
    return out;
}

}  // namespace agentctl
