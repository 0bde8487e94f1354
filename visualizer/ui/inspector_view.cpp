// Inspector view: event fields, bucket table, values before/after a reduction, data split.
#include "ui/inspector_view.hpp"

#include "replay/row_runs.hpp"

#include "replay/reduction_check.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dpscope/base/format_bytes.hpp"
#include "replay/run_info.hpp"
#include "replay/seek.hpp"
#include "ui/draw_util.hpp"

namespace dpscope::viz {

namespace {

void row(const char* key, const std::string& value) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextDisabled("%s", key);
  ImGui::TableSetColumnIndex(1);
  ImGui::TextUnformatted(value.c_str());
}

std::string param_name(const trace::TraceData& data, int index) {
  const auto& params = data.header.params;
  return index >= 0 && static_cast<size_t>(index) < params.size() ? params[static_cast<size_t>(index)].name
                                                                  : fmt::format("param {}", index);
}

std::string device_of(const ReplayModel& model, int32_t id) {
  const int d = model.device_index(id);
  return d >= 0 ? fmt::format("{} ({})", device_label(model.devices()[d]), model.devices()[d].name)
                : fmt::format("dev {}", id);
}

}  // namespace

void InspectorView::draw_event(ViewContext& ctx, uint32_t event, bool selected) {
  const ReplayModel& model = *ctx.model;
  const trace::TraceData& data = model.data();
  const trace::Event& e = data.events[event];
  ImGui::TextUnformatted(selected ? "Selected event"
                                  : "Latest event (click one in the timeline to select it)");
  ImGui::SameLine();
  if (ImGui::SmallButton("move playhead here")) ctx.seek(model.after_event(model.position_of(event)));
  if (selected) {
    ImGui::SameLine();
    if (ImGui::SmallButton("clear")) ctx.select(kNoEvent);
  }
  if (!ImGui::BeginTable(
          "event_fields", 2,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp))
    return;
  row("type", trace::to_string(e.type));
  if (!data.str(e.name).empty()) row("name", std::string(data.str(e.name)));
  if (!data.str(e.cat).empty()) row("category", std::string(data.str(e.cat)));
  row("device", device_of(model, e.dev));
  row("rank", fmt::format("{}", e.rank));
  row("step / phase", e.step >= 0 ? fmt::format("{} (trace \"step\":{}) / {}", shown_count(e.step), e.step,
                                                to_string(e.phase))
                                  : fmt::format("- / {}", to_string(e.phase)));
  if (e.type == trace::EventType::kSpan || e.type == trace::EventType::kTransfer)
    row("stream", to_string(e.stream));
  row("start", fmt::format("{} (ts {} ns)", format_time(e.ts_ns - model.begin_ns()), e.ts_ns));
  if (e.dur_ns > 0) row("duration", format_time(e.dur_ns));
  if (e.type == trace::EventType::kTransfer) {
    const trace::Transfer& t = data.transfer(e);
    row("from → to", fmt::format("{} → {}", device_of(model, t.src), device_of(model, t.dst)));
    row("bytes", fmt::format("{} ({} B)", format_bytes(t.bytes), t.bytes));
    if (e.dur_ns > 0)
      row("bandwidth",
          fmt::format("{:.1f} GB/s", static_cast<double>(t.bytes) / static_cast<double>(e.dur_ns)));
    row("flow", fmt::format("{}", t.flow));
    if (t.coll >= 0) {
      const auto [first, last] = model.algo_step_range(t.coll);
      row("collective", fmt::format("#{} {} step {}/{} chunk {}", t.coll, data.str(t.algo),
                                    t.algo_step - first + 1, last - first + 1, t.chunk));
    }
  }
  if ((e.type == trace::EventType::kSpan || e.type == trace::EventType::kInstant) && e.payload >= 0 &&
      static_cast<size_t>(e.payload) < data.args.size()) {
    for (const auto& [key, value] : data.arg_values(data.args[static_cast<size_t>(e.payload)])) {
      const std::string k(data.str(key));
      std::string v = fmt::format("{}", value);
      if (k == "param")
        v = fmt::format("{} ({})", static_cast<int>(value), param_name(data, static_cast<int>(value)));
      if (k == trace_key::kFlops) v = fmt::format("{:.3g}", value);
      if (k == trace_key::kBytes) v = format_bytes(static_cast<uint64_t>(std::max(value, 0.0)));
      row(k.c_str(), v);
    }
  }
  if (e.type == trace::EventType::kCounter && e.payload >= 0) {
    for (const auto& [key, value] : data.counter_values(data.counters[static_cast<size_t>(e.payload)])) {
      const std::string k(data.str(key));
      row(k.c_str(), e.known == EventName::kMemory ? format_bytes(static_cast<uint64_t>(std::max(value, 0.0)))
                                                   : fmt::format("{}", value));
    }
  }
  if (e.type == trace::EventType::kValues && e.payload >= 0) {
    const trace::ValueSample& v = data.values[static_cast<size_t>(e.payload)];
    row("tensor", fmt::format("{} of {}", data.str(e.name), param_name(data, v.param)));
    row("when", std::string(data.str(v.when)));
    row("values", fmt::format("[{:.4g}]", fmt::join(v.values, ", ")));
    row("norm", fmt::format("{:.5g}", v.norm));
  }
  if (e.type == trace::EventType::kSamples && e.payload >= 0) {
    const auto& idx = data.samples[static_cast<size_t>(e.payload)].indices;
    row("rows",
        fmt::format("{} rows: {}{}", idx.size(),
                    fmt::join(idx.begin(),
                              idx.begin() + static_cast<ptrdiff_t>(std::min<size_t>(idx.size(), 32)), ", "),
                    idx.size() > 32 ? ", …" : ""));
  }
  if (e.type == trace::EventType::kBuckets && e.payload >= 0) {
    const trace::BucketAssignment& b = data.buckets[static_cast<size_t>(e.payload)];
    row("reason", std::string(data.str(b.reason)));
    for (const TraceBucketInfo& bucket : b.buckets)
      row(fmt::format("bucket {}", bucket.id).c_str(),
          fmt::format("params [{}], {}", fmt::join(bucket.params, ","), format_bytes(bucket.bytes)));
  }
  row("line", fmt::format("{}", e.line));
  ImGui::EndTable();
}

void InspectorView::draw_buckets(const ViewContext& ctx) {
  const ReplayState& state = *ctx.state;
  const ReplayModel& model = *ctx.model;
  const trace::TraceData& data = model.data();
  if (state.buckets.empty()) return;
  ImGui::Separator();
  const char* source = "header";
  if (state.bucket_assignment_event != kNoEvent) {
    const trace::Event& e = data.events[state.bucket_assignment_event];
    const bool rebuilt =
        e.payload >= 0 && data.buckets[static_cast<size_t>(e.payload)].reason_kind == BucketReason::kRebuilt;
    source = to_string(rebuilt ? BucketReason::kRebuilt : BucketReason::kInitial);
  }
  ImGui::Text("Gradient buckets (%s assignment; bucket 0 is reduced first)", source);
  // One row per bucket: its parameters, its size, its state on every rank. Where the ranks leave the
  // parameters room, they come first, wrapped; with many ranks the table is wider than the panel, so
  // the parameters go last on one line and the table scrolls sideways, its bucket column staying.
  const ImGuiStyle& style = ImGui::GetStyle();
  const int ranks = static_cast<int>(state.bucket_devices.size());
  const float cell = ImGui::CalcTextSize("00/00 ready").x + 2 * style.CellPadding.x;
  const float avail = ImGui::GetContentRegionAvail().x;
  const bool wrap = avail - cell * static_cast<float>(ranks + 1) >= 0.4f * avail;
  const int columns = (wrap ? 2 : 3) + ranks;
  constexpr int first_rank = 2;  // after the bucket (or bucket: parameters) and size columns
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit;
  ImVec2 outer(0, 0);
  if (!wrap) {
    flags |= ImGuiTableFlags_ScrollX;  // a scrolling table needs its height: one line a row
    const float row_h = ImGui::GetTextLineHeight() + 2 * style.CellPadding.y;
    outer.y = row_h * static_cast<float>(state.buckets.size() + 1) + style.ScrollbarSize + 4;
  }
  if (!ImGui::BeginTable("buckets", columns, flags, outer)) return;
  if (wrap) {
    ImGui::TableSetupColumn("bucket: parameters", ImGuiTableColumnFlags_WidthStretch);
  } else {
    ImGui::TableSetupScrollFreeze(1, 0);
    ImGui::TableSetupColumn("bucket");
  }
  ImGui::TableSetupColumn("size");
  for (int d : state.bucket_devices) {
    const ModelDevice& dev = model.devices()[d];
    const std::string name = dev.rank >= 0 ? fmt::format("rank {}", dev.rank) : device_label(dev);
    ImGui::TableSetupColumn(name.c_str());
  }
  if (!wrap) ImGui::TableSetupColumn("parameters");
  ImGui::TableHeadersRow();
  for (const BucketSnapshot& b : state.buckets) {
    std::string params;
    for (int p : b.params) params += (params.empty() ? "" : ", ") + param_name(data, p);
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    if (wrap) {
      ImGui::TextWrapped("%d: %s", b.id, params.c_str());
    } else {
      ImGui::Text("%d", b.id);
    }
    ImGui::TableSetColumnIndex(1);
    ImGui::TextUnformatted(format_bytes(b.bytes).c_str());
    for (int c = 0; c < ranks; ++c) {
      ImGui::TableSetColumnIndex(first_rank + c);
      const BucketState st = b.state[static_cast<size_t>(c)];
      ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, with_alpha(ctx.palette->bucket_color(st), 0.45f));
      if (st == BucketState::kPending && !b.params.empty()) {
        ImGui::Text("%d/%zu ready", b.ready_params[static_cast<size_t>(c)], b.params.size());
      } else {
        ImGui::TextUnformatted(to_string(st));
      }
    }
    if (!wrap) {
      ImGui::TableSetColumnIndex(columns - 1);
      ImGui::TextUnformatted(params.c_str());
    }
  }
  ImGui::EndTable();
}

void InspectorView::draw_reduction(const ViewContext& ctx) {
  const ReplayState& state = *ctx.state;
  const ReplayModel& model = *ctx.model;
  if (state.reduction < 0) return;
  const Reduction& r = model.reductions()[static_cast<size_t>(state.reduction)];
  const trace::TraceData& data = model.data();
  auto values_of = [&](uint32_t ev) -> const trace::ValueSample& {
    return data.values[static_cast<size_t>(data.events[ev].payload)];
  };
  const ReductionCheck check = check_reduction(model, r, state.cursor, 4);
  if (check.rows.empty() && check.after.empty()) return;
  ImGui::Separator();
  const std::string what = r.param >= 0 ? fmt::format("Gradient of {}", param_name(data, r.param))
                                        : fmt::format("Values of {}", data.str(r.name));
  ImGui::Text("%s, step %lld: %s", what.c_str(), static_cast<long long>(shown_count(r.step)),
              check.reduced() ? "reduced" : (check.before ? "waiting for its reduction" : "local values"));
  const std::vector<size_t>& columns = check.columns;
  const size_t width = columns.size();
  if (!ImGui::BeginTable("reduction", static_cast<int>(width) + 2,
                         ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
    return;
  ImGui::TableSetupColumn("");
  for (size_t col : columns)
    ImGui::TableSetupColumn(fmt::format("[{}]", static_cast<int64_t>(col) * check.stride).c_str());
  ImGui::TableSetupColumn("norm");
  ImGui::TableHeadersRow();
  // Per column, as many digits as tell the ranks' values (and the result) apart: two ranks at
  // -0.3121 and -0.3125 must not both read -0.312.
  std::vector<int> digits(width, 3);
  for (size_t k = 0; k < width; ++k) {
    std::vector<double> column;
    for (const std::vector<uint32_t>* events : {&check.rows, &check.after})
      for (uint32_t ev : *events)
        if (columns[k] < values_of(ev).values.size())
          column.push_back(static_cast<double>(values_of(ev).values[columns[k]]));
    digits[k] = distinguishing_digits(column);
  }
  auto value_row = [&](const std::string& label, const std::vector<float>& v, double norm, ImU32 color) {
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%s", label.c_str());
    for (size_t k = 0; k < width; ++k) {
      ImGui::TableSetColumnIndex(static_cast<int>(k) + 1);
      if (columns[k] < v.size())
        ImGui::TextUnformatted(format_value(static_cast<double>(v[columns[k]]), digits[k]).c_str());
    }
    ImGui::TableSetColumnIndex(static_cast<int>(width) + 1);
    if (norm >= 0) ImGui::Text("%.3g", norm);
  };
  const char* when = check.before ? "before" : "local";
  std::vector<double> sum;
  for (uint32_t ev : check.rows) {
    const trace::ValueSample& v = values_of(ev);
    value_row(fmt::format("rank {} {}", data.events[ev].rank, when), v.values, v.norm, ctx.palette->text);
    if (sum.size() < v.values.size()) sum.resize(v.values.size(), 0.0);
    for (size_t i = 0; i < v.values.size(); ++i) sum[i] += v.values[i];
  }
  if (check.rows.size() > 1) {
    std::vector<float> mean(sum.size());
    for (size_t i = 0; i < sum.size(); ++i)
      mean[i] = static_cast<float>(sum[i] / static_cast<double>(check.rows.size()));
    value_row(fmt::format("mean of {} ranks", check.rows.size()), mean, -1.0, ctx.palette->text_dim);
  }
  if (check.reduced()) {
    // One row per distinct result (all ranks agree after an all-reduce).
    const trace::ValueSample& a = values_of(check.after.front());
    const bool all_same = std::all_of(check.after.begin(), check.after.end(),
                                      [&](uint32_t ev) { return values_of(ev).values == a.values; });
    const std::string who = check.after.size() == 1
                                ? fmt::format("rank {}", data.events[check.after.front()].rank)
                                : (all_same ? fmt::format("all {} ranks", check.after.size()) : "rank 0");
    value_row(fmt::format("after ({})", who), a.values, a.norm, ctx.palette->optimizer);
  }
  ImGui::EndTable();
  if (check.reduced() && check.rows.size() > 1) {
    const std::string verdict = reduction_verdict(parse_run_info(data.header.run_json), check.is_mean,
                                                  check.is_sum, check.rows.size());
    if (!verdict.empty()) {
      const bool pitfall = !check.is_mean && verdict.find("pitfall") != std::string::npos;
      const ImU32 color = check.is_mean ? ctx.palette->optimizer
                          : pitfall     ? ctx.palette->error
                                        : ctx.palette->copy;
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%s", verdict.c_str());
      ImGui::PopTextWrapPos();
    }
  }
  draw_step_reductions(ctx, r.step);
}

// Every reduction of the step so far, one line each: the table above follows the latest, this
// list keeps the "after" of every bucket's parameters in view.
void InspectorView::draw_step_reductions(const ViewContext& ctx, int64_t step) {
  const ReplayModel& model = *ctx.model;
  const trace::TraceData& data = model.data();
  std::vector<const Reduction*> rs;
  for (const Reduction& r : model.reductions())
    if (r.step == step && model.applied(model.event_at(r.first_pos), ctx.state->cursor)) rs.push_back(&r);
  if (rs.size() < 2) return;
  if (!ImGui::TreeNodeEx("step_reductions", ImGuiTreeNodeFlags_DefaultOpen,
                         "All reductions of step %lld (%zu)", static_cast<long long>(shown_count(step)),
                         rs.size()))
    return;
  const RunInfo run = parse_run_info(data.header.run_json);
  for (const Reduction* r : rs) {
    const ReductionCheck check = check_reduction(model, *r, ctx.state->cursor, 4);
    const std::string name = r->param >= 0 ? param_name(data, r->param) : std::string(data.str(r->name));
    std::string result = check.reduced() ? "reduced" : "waiting";
    ImU32 color = ctx.palette->text_dim;
    if (check.reduced() && check.rows.size() > 1) {
      result = check.is_mean  ? "mean of the ranks"
               : check.is_sum ? "sum of the ranks"
                              : "neither mean nor sum";
      const bool expected = check.is_mean || (check.is_sum && run.mode == "dp");
      color = expected ? ctx.palette->optimizer : ctx.palette->error;
    }
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%-12s %s", name.c_str(), result.c_str());
  }
  ImGui::TreePop();
}

void InspectorView::draw_data_split(const ViewContext& ctx) {
  const ReplayModel& model = *ctx.model;
  const ReplayState& state = *ctx.state;
  bool any = false;
  for (const DeviceSnapshot& d : state.devices) any = any || d.samples != nullptr;
  if (!any) return;
  ImGui::Separator();
  ImGui::TextUnformatted("Data split (dataset rows per GPU)");
  for (size_t d = 0; d < state.devices.size(); ++d) {
    const DeviceSnapshot& ds = state.devices[d];
    if (ds.samples == nullptr) continue;
    const std::vector<int64_t>& rows = *ds.samples;
    // As runs ("0–63", "1–253 every 4th"); at most 24 of them.
    const std::vector<RowRun> runs = row_runs(rows);
    std::string text;
    for (size_t i = 0; i < std::min<size_t>(runs.size(), 24); ++i)
      text += (i == 0 ? "" : ", ") + format_row_run(runs[i]);
    if (runs.size() > 24) text += ", …";
    ImGui::TextWrapped("%s (step %lld): %zu rows: %s", device_label(model.devices()[d]).c_str(),
                       static_cast<long long>(shown_count(ds.samples_step)), rows.size(), text.c_str());
  }
}

void InspectorView::draw(ViewContext& ctx) {
  if (ctx.model == nullptr || ctx.state == nullptr) return;
  draw_reduction(ctx);
  draw_buckets(ctx);
  draw_data_split(ctx);
  // The event table is a developer detail: hidden in presentation mode.
  const uint32_t selected = ctx.selected();
  const uint32_t event =
      selected != kNoEvent && selected < ctx.model->data().events.size() ? selected : ctx.state->last_event;
  if (!ctx.present && event != kNoEvent) {
    ImGui::Separator();
    draw_event(ctx, event, event == selected);
  }
}

}  // namespace dpscope::viz
