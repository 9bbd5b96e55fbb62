// Compensation (docs/CONTROL_FLOW.md, "Compensation"): what a compensation run undoes, read from
// the journal, and the document it runs. The link between a source run and its compensation
// runs is their ids (`SOURCE-compensation-N`) and the compensation run's recorded options, so
// the journal's schema is unchanged: a source effect is `compensated` when a linked run's undo
// of it succeeded.
#include <agentctl/compensation.hpp>
#include <agentctl/resume.hpp>
#include <agentctl/template.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace json = boost::json;

namespace agentctl {
namespace {

bool mutates(action_kind k) {
    return k == action_kind::shell_exec || k == action_kind::extension_process || k == action_kind::write;
}

// Whether any string in `v` holds a template: a rendered undo input must be data only, since
// the compensation run's compiler reads its `with` again.
bool holds_template(const json::value& v) {
    if (const auto* s = v.if_string()) return looks_templated(std::string_view(s->data(), s->size()));
    if (const auto* a = v.if_array())
        return std::any_of(a->begin(), a->end(), [](const json::value& x) { return holds_template(x); });
    if (const auto* o = v.if_object())
        return std::any_of(o->begin(), o->end(), [](const auto& m) { return holds_template(m.value()); });
    return false;
}

bool live(const journal_run& r, const owner_alive_fn& alive) {
    return r.state == journal_run_state::running && alive && alive(r.owner);
}

// One linked compensation run, as planning reads it.
struct linked_run {
    journal_run run;
    compensation_request request;
};

journal_result<std::vector<linked_run>> linked_runs(journal& db, std::string_view source) {
    std::vector<linked_run> out;
    for (std::uint32_t n = 1;; ++n) {
        auto r = db.load_run(compensation_run_id(source, n));
        if (!r) {
            if (r.error().code == journal_errc::unknown_run) return out;
            return r.error();
        }
        // The id makes it ours; a selection that cannot be read undid nothing known.
        auto request = recorded_compensation(*r);
        out.push_back({std::move(*r), request.value_or(compensation_request{})});
    }
}

}  // namespace

std::string compensation_run_id(std::string_view source, std::uint32_t n) {
    return std::string(source) + "-compensation-" + std::to_string(n);
}

std::optional<compensation_request> recorded_compensation(const journal_run& run) {
    boost::system::error_code ec;
    json::value v = json::parse(run.options_json, ec);
    const json::object* o = ec ? nullptr : v.if_object();
    if (!o) return std::nullopt;
    const auto* mode = o->if_contains("mode");
    const auto* c = o->if_contains("compensation");
    if (!mode || !mode->is_string() || mode->get_string() != "compensation" || !c || !c->is_object())
        return std::nullopt;
    compensation_request r;
    const json::object& co = c->get_object();
    if (const auto* s = co.if_contains("sourceRunId"); s && s->is_string()) r.source_run_id = s->get_string();
    if (const auto* items = co.if_contains("items"); items && items->is_array())
        for (const auto& x : items->get_array()) {
            const json::object* xo = x.if_object();
            if (!xo) continue;
            compensation_request::item item;
            if (const auto* s = xo->if_contains("sourceTaskId"); s && s->is_string())
                item.source_task_id = s->get_string();
            if (const auto* s = xo->if_contains("declaredTaskId"); s && s->is_string())
                item.declared_task_id = s->get_string();
            if (const auto* w = xo->if_contains("with")) item.with = *w;
            r.items.push_back(std::move(item));
        }
    return r;
}

std::string compensation_options_json(const compensation_request& request) {
    json::array items;
    for (const auto& i : request.items)
        items.push_back(json::object{
            {"sourceTaskId", i.source_task_id}, {"declaredTaskId", i.declared_task_id}, {"with", i.with}});
    json::object o{
        {"mode", "compensation"},
        {"sourceRunId", request.source_run_id},
        {"compensation", json::object{{"sourceRunId", request.source_run_id}, {"items", std::move(items)}}},
        {"jobs", 1},
        {"keepGoing", true}};
    return json::serialize(o);
}

journal_result<std::vector<compensated_effect>> compensated_effects(journal& db,
                                                                    std::string_view source_run_id) {
    auto runs = linked_runs(db, source_run_id);
    if (!runs) return runs.error();
    std::vector<compensated_effect> out;
    for (const auto& l : *runs) {
        std::map<std::string, std::string> source_of;
        for (const auto& i : l.request.items)
            source_of[compensation_task_id(i.source_task_id)] = i.source_task_id;
        auto error = db.for_each_result(l.run.run_id, false, [&](journal_task_result& r) {
            auto it = source_of.find(r.task_id);
            if (it == source_of.end() || r.result.state != task_state::succeeded) return true;
            out.push_back({std::string(source_run_id), it->second, l.run.run_id, r.task_id,
                           l.run.run_id + ":" + r.task_id + ":" + std::to_string(r.result.attempts)});
            return true;
        });
        if (error) return *error;
    }
    return out;
}

compensation_plan prepare_compensation(journal& db, std::string_view source_run_id,
                                       const std::optional<std::string>& only_task,
                                       const owner_alive_fn& alive) {
    compensation_plan cp;
    auto refuse = [&](exit_status status, std::string message) {
        cp.status = status;
        cp.message = std::move(message);
        return cp;
    };
    auto journal_failed = [&](const journal_error& e) {
        cp.journal_code = e.code;
        return refuse(exit_status::persistence, e.message);
    };
    auto source = db.load_run(source_run_id);
    if (!source) return journal_failed(source.error());
    cp.source = std::move(*source);
    const std::string src(source_run_id);
    if (recorded_compensation(cp.source)) {
        cp.diags.error("compensation_of_compensation", "", "run " + src + " is a compensation run",
                       "compensate its source run instead");
        return refuse(exit_status::usage,
                      "run " + src + " is a compensation run: it is not compensated itself");
    }
    if (cp.source.state == journal_run_state::running || cp.source.state == journal_run_state::interrupted) {
        bool is_live = live(cp.source, alive);
        cp.diags.error(
            "source_not_terminal", "",
            "run " + src + (is_live ? " is still running" : " was interrupted: it may still be resumed"),
            is_live ? "wait for it to end" : "finish it with `agentctl resume " + src + "` first");
        return refuse(exit_status::policy, "run " + src + " has not ended: nothing was compensated");
    }

    // A preview (`run --check`) had no effect to undo.
    {
        boost::system::error_code ec;
        json::value options = json::parse(cp.source.options_json, ec);
        const json::object* o = ec ? nullptr : options.if_object();
        const json::value* check = o ? o->if_contains("check") : nullptr;
        if (check && check->is_bool() && check->get_bool()) {
            cp.diags.error("source_is_preview", "",
                           "run " + src + " was a preview (run --check): it had no effect",
                           "compensate a run that ran");
            return refuse(exit_status::usage,
                          "run " + src + " was a preview: there is nothing to compensate");
        }
    }

    // The source plan, compiled again exactly as it was run.
    auto request = recorded_request(cp.source);
    if (!request) return refuse(exit_status::persistence, "the inputs of run " + src + " cannot be read");
    session s = open_session(*request);
    if (!s.ok()) {
        cp.diags = std::move(s.diags);
        return refuse(exit_status::persistence, "the stored workflow of run " + src + " no longer compiles");
    }
    const plan& p = *s.compiled;
    if (p.plan_digest != cp.source.plan_digest)
        return refuse(exit_status::persistence,
                      "the stored workflow of run " + src +
                          " compiles to another plan: it cannot be compensated safely");
    cp.settings = p.compensation;
    cp.request.source_run_id = src;

    // What earlier compensation runs did: each one must have ended, their undos count once.
    auto runs = linked_runs(db, src);
    if (!runs) return journal_failed(runs.error());
    std::map<std::string, compensated_effect> done;  // by source task id
    std::set<std::string> undo_uncertain;
    for (const auto& l : *runs) {
        if (l.run.state == journal_run_state::running || l.run.state == journal_run_state::interrupted) {
            bool is_live = live(l.run, alive);
            cp.diags.error(
                "compensation_in_progress", "",
                "compensation run " + l.run.run_id + (is_live ? " is still running" : " was interrupted"),
                is_live ? "wait for it to end"
                        : "finish it with `agentctl resume " + l.run.run_id +
                              "`: an undo it started is never sent again silently");
            return refuse(exit_status::policy, "run " + src + " is being compensated by " + l.run.run_id +
                                                   ": nothing more was started");
        }
        auto uncertain = db.uncertain_attempts(l.run.run_id);
        if (!uncertain) return journal_failed(uncertain.error());
        std::map<std::string, std::string> source_of;
        for (const auto& i : l.request.items)
            source_of[compensation_task_id(i.source_task_id)] = i.source_task_id;
        for (const auto& a : *uncertain)
            if (auto it = source_of.find(a.intent.task_id); it != source_of.end())
                undo_uncertain.insert(it->second);
    }
    auto effects = compensated_effects(db, src);
    if (!effects) return journal_failed(effects.error());
    for (auto& e : *effects) done.emplace(e.source_task_id, e);
    for (auto& [id, e] : done) {
        undo_uncertain.erase(id);  // a later undo succeeded
        cp.already.push_back(e);
    }
    auto uncertain = db.uncertain_attempts(src);
    if (!uncertain) return journal_failed(uncertain.error());
    std::set<std::string> effect_uncertain;
    for (const auto& a : *uncertain) effect_uncertain.insert(a.intent.task_id);

    // Outputs of the source tasks an undo reads, loaded once each.
    std::map<std::string, json::value> outputs;
    std::map<std::string, bool> loaded;
    auto output_of = [&](std::string_view id) -> const json::value* {
        std::string key(id);
        if (!loaded[key]) {
            loaded[key] = true;
            auto r = db.load_result(src, key, false);
            if (r && *r && (**r).result.state == task_state::succeeded) outputs[key] = (**r).result.output;
        }
        auto it = outputs.find(key);
        return it == outputs.end() ? nullptr : &it->second;
    };

    bool selected_any = false;
    std::vector<compensation_request::item> items;
    std::vector<std::string> actions;
    for (std::uint32_t i = 0; i < p.size(); ++i) {
        const plan_task& n = p.node(i);
        if (n.kind == plan_task::kind_t::aggregate || !n.compensate) continue;
        const std::string id = p.task_id(i);
        const std::string declared_id = n.kind == plan_task::kind_t::child ? n.parent : id;
        if (only_task && *only_task != id && *only_task != declared_id) continue;
        selected_any = true;
        if (done.count(id)) continue;
        if (undo_uncertain.count(id)) {
            cp.blocked.push_back(
                {id, "unreconciled_compensation_effect",
                 "an earlier undo of task `" + id +
                     "` may have had its effect: it is not sent again until that run is settled "
                     "(`agentctl resume RUN --rerun-uncertain` sends it again deliberately)"});
            continue;
        }
        if (effect_uncertain.count(id)) {
            cp.blocked.push_back({id, "unreconciled_effect",
                                  "task `" + id +
                                      "` may have had its effect (its last attempt has no certain end): "
                                      "check what it did, then resume run " +
                                      src + " with --rerun-uncertain"});
            continue;
        }
        auto result = db.load_result(src, id, false);
        if (!result) return journal_failed(result.error());
        if (!*result || (**result).result.state != task_state::succeeded) continue;  // nothing to undo
        if (!mutates(p.action_of(n).kind)) continue;  // a pure task changed nothing
        plan_task whole = p.task(i);
        render_context ctx;
        ctx.inputs = &p.inputs;
        json::value vars(whole.vars);
        ctx.vars = &vars;
        ctx.task_output = output_of;
        std::string error;
        auto with = render(n.compensate->with, ctx, error);
        if (!with || holds_template(*with)) {
            cp.blocked.push_back({id, "compensation_input_invalid",
                                  "the compensation of task `" + id + "` cannot be rendered over run " + src +
                                      ": " + (with ? std::string("a rendered value holds `${{`") : error)});
            continue;
        }
        items.push_back({id, declared_id, with->is_null() ? json::value(json::object()) : std::move(*with)});
        actions.push_back(n.compensate->action);
    }
    if (only_task && !selected_any) {
        cp.diags.error("unknown_task", "",
                       "run " + src + " has no task `" + *only_task + "` with `compensate`");
        return refuse(exit_status::usage, "--task " + *only_task + ": no such task to compensate");
    }
    // The reverse of the compiled order: what was done last is undone first.
    std::reverse(items.begin(), items.end());
    std::reverse(actions.begin(), actions.end());
    cp.request.items = std::move(items);
    cp.actions = std::move(actions);
    for (const auto& b : cp.blocked)
        cp.diags.error(b.code, "", b.message, "nothing is compensated while an effect is uncertain");
    if (!cp.blocked.empty()) {
        cp.request.items.clear();
        cp.actions.clear();
        return refuse(exit_status::policy, "run " + src + ": " + std::to_string(cp.blocked.size()) +
                                               (cp.blocked.size() == 1 ? " effect is" : " effects are") +
                                               " uncertain; nothing was compensated");
    }
    if (!cp.request.items.empty())
        cp.run_id = compensation_run_id(src, static_cast<std::uint32_t>(runs->size() + 1));
    return cp;
}

}  // namespace agentctl
