//===- PyTorchCsv.cpp - torch.distributed.pipelining CSV ------------------===//
//
// Export and import of PyTorch's pipelining schedule CSV; see PyTorchCsv.h.
//
//===----------------------------------------------------------------------===//

#include "scheduler/formats/PyTorchCsv.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/ScheduleError.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

using namespace stagecraft::pipe::sched;

char CsvError::ID = 0;

void CsvError::log(llvm::raw_ostream &os) const {
  os << position.line << ":" << position.column << ": " << message;
}

/// PyTorch's cell for one side of a transfer.
static void appendCommCell(std::string &out, const CommOp &op) {
  const Message &m = op.message;
  bool act = m.kind == MessageKind::Activation;
  // Sends name the producing stage, receives the consuming one.
  int stage = op.isSend ? m.stage : (act ? m.stage + 1 : m.stage - 1);
  fmt::format_to(std::back_inserter(out), FMT_COMPILE("{}{}_{}{}"), stage,
                 op.isSend ? "SEND" : "RECV", act ? 'F' : 'B', m.microbatch);
}

/// The stage whose gradient \p a computes (W, B, an F&B's backward), or -1.
static int gradientStage(const Action &a) {
  if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight)
    return a.stage;
  if (a.kind == ActionKind::ForwardBackward)
    return a.backwardStage;
  return -1;
}

llvm::Expected<std::string>
stagecraft::pipe::sched::formatPyTorchCsv(const Program &program,
                                          const TorchGradientCells *gradients) {
  for (int r = 0; r < program.numRanks(); ++r)
    for (int i = 0, e = static_cast<int>(program.ranks[r].size()); i < e; ++i)
      if (program.ranks[r][i].kind == Instruction::Kind::Compute &&
          isAttention(program.ranks[r][i].action.kind))
        return scheduleError(
            fmt::format("{} is a separate attention task, which the PyTorch "
                        "CSV cannot express",
                        shortName(program.ranks[r][i].action)),
            {r, i});
  std::string out;
  for (int r = 0; r < program.numRanks(); ++r) {
    const std::vector<Instruction> &rank = program.ranks[r];
    bool first = true;
    auto next = [&] {
      if (!first)
        out += ',';
      first = false;
    };
    // "<stage><text><microbatch>", or "<stage><text>" without one.
    auto stageCell = [&](int stage, const char *text, int mb = -1) {
      next();
      auto to = std::back_inserter(out);
      if (mb < 0)
        fmt::format_to(to, FMT_COMPILE("{}{}"), stage, text);
      else
        fmt::format_to(to, FMT_COMPILE("{}{}{}"), stage, text, mb);
    };
    // torch's runtime retires every send at an explicit WAIT_SEND: a
    // forward send after the local backward of its stage and microbatch
    // (which proves the peer took it, so the wait never blocks), the others
    // at the end of the step.
    std::vector<std::pair<int, int>> pendingForward, pendingOther;
    // Data-parallel cells: each stage's last gradient action on this rank,
    // and the reduction not yet waited for.
    std::map<int, int> lastGradient;
    std::optional<int> pendingReduce;
    auto waitReduce = [&]() {
      if (!pendingReduce)
        return;
      stageCell(*pendingReduce, "WAIT_REDUCE_GRAD");
      if (gradients->sharded)
        stageCell(*pendingReduce, "RESHARD");
      pendingReduce.reset();
    };
    if (gradients) {
      std::vector<int> firstUse;
      for (int i = 0, e = static_cast<int>(rank.size()); i < e; ++i) {
        if (rank[i].kind != Instruction::Kind::Compute)
          continue;
        const Action &a = rank[i].action;
        for (int s : {a.stage, a.backwardStage})
          if (s >= 0 && !llvm::is_contained(firstUse, s))
            firstUse.push_back(s);
        if (int s = gradientStage(a); s >= 0)
          lastGradient[s] = i;
      }
      if (gradients->sharded)
        for (int s : firstUse)
          stageCell(s, "UNSHARD");
    }
    for (int i = 0, e = static_cast<int>(rank.size()); i < e; ++i) {
      const Instruction &instr = rank[i];
      if (instr.kind != Instruction::Kind::Compute) {
        for (const CommOp &op : instr.ops) {
          next();
          appendCommCell(out, op);
          if (!op.isSend)
            continue;
          (op.message.kind == MessageKind::Activation ? pendingForward
                                                      : pendingOther)
              .push_back({op.message.stage, op.message.microbatch});
        }
        continue;
      }
      const Action &a = instr.action;
      next();
      appendTorchName(out, a);
      if (int s = gradientStage(a);
          gradients && s >= 0 && lastGradient.at(s) == i) {
        waitReduce();
        stageCell(s, "REDUCE_GRAD");
        pendingReduce = s;
      }
      std::optional<std::pair<int, int>> backward;
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput)
        backward = {a.stage, a.microbatch};
      else if (a.kind == ActionKind::ForwardBackward)
        backward = {a.backwardStage, a.backwardMicrobatch};
      if (!backward)
        continue;
      auto it =
          std::find(pendingForward.begin(), pendingForward.end(), *backward);
      if (it != pendingForward.end()) {
        stageCell(it->first, "WAIT_SEND_F", it->second);
        pendingForward.erase(it);
      }
    }
    for (auto [stage, mb] : pendingForward)
      stageCell(stage, "WAIT_SEND_F", mb);
    for (auto [stage, mb] : pendingOther)
      stageCell(stage, "WAIT_SEND_B", mb);
    if (gradients)
      waitReduce();
    out += '\n';
  }
  return out;
}

llvm::Expected<std::string>
stagecraft::pipe::sched::formatPyTorchCsv(const Schedule &schedule) {
  Program program;
  program.placement = schedule.placement;
  for (const std::vector<Action> &rank : schedule.ranks) {
    program.ranks.emplace_back();
    for (const Action &a : rank)
      program.ranks.back().push_back(Instruction::compute(a));
  }
  return formatPyTorchCsv(program);
}

static bool parseIndex(llvm::StringRef text, int &value) {
  if (text.empty() || !llvm::all_of(text, llvm::isDigit))
    return false;
  return !text.getAsInteger(10, value);
}

llvm::Expected<ImportedSchedule>
stagecraft::pipe::sched::parsePyTorchCsv(llvm::StringRef text,
                                         const Problem &problem) {
  auto fail = [](CsvPosition pos, std::string message) {
    return llvm::make_error<CsvError>(pos, std::move(message));
  };
  ImportedSchedule result;
  Schedule &schedule = result.schedule;
  const int n = problem.numStages();
  std::vector<int> firstRow(n, -1);
  // Every cell in order, comm ones resolved once the placement is known.
  struct Cell {
    bool isComm;
    std::string kind;
    int stage, mb;
    CsvPosition pos;
  };
  std::vector<std::vector<Cell>> cells;
  bool anyComm = false;

  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  // Trailing empty lines carry no rank.
  while (!lines.empty() && lines.back().trim().empty())
    lines.pop_back();
  for (int lineNo = 0, e = static_cast<int>(lines.size()); lineNo < e;
       ++lineNo) {
    llvm::StringRef line = lines[lineNo].rtrim("\r");
    int r = lineNo;
    if (r >= problem.ranks)
      return fail({lineNo + 1, 1},
                  fmt::format("row {} is one too many: pipeline @{} has {} "
                              "ranks",
                              lineNo + 1, problem.name, problem.ranks));
    schedule.ranks.emplace_back();
    result.positions.emplace_back();
    cells.emplace_back();
    size_t column = 0;
    while (true) {
      size_t comma = line.find(',', column);
      llvm::StringRef raw = line.slice(column, comma);
      CsvPosition pos{lineNo + 1, static_cast<int>(column) + 1};
      llvm::StringRef cell = raw.trim();
      if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"')
        cell = cell.drop_front().drop_back().trim();
      if (!cell.empty() && cell.starts_with("(")) {
        // torch's overlapped action: "(<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B".
        int fStage = 0, fMb = 0, bStage = 0, bMb = 0;
        llvm::StringRef inner = cell.drop_front();
        auto [halves, suffix] = inner.split(')');
        auto [fText, bText] = halves.split(';');
        auto half = [&](llvm::StringRef t, char letter, int &stage, int &mb) {
          t = t.trim();
          size_t at = t.find(letter);
          return at != llvm::StringRef::npos &&
                 parseIndex(t.take_front(at), stage) &&
                 parseIndex(t.drop_front(at + 1), mb);
        };
        if (suffix != "OVERLAP_F_B" || !half(fText, 'F', fStage, fMb) ||
            !half(bText, 'B', bStage, bMb))
          return fail(pos, fmt::format("bad overlapped action '{}': expected "
                                       "(<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B"
                                       ", e.g. (0F3;1B1)OVERLAP_F_B",
                                       cell.str()));
        for (int stage : {fStage, bStage})
          if (stage >= n)
            return fail(pos, fmt::format("action '{}' names stage {}, "
                                         "pipeline @{} has {} stages",
                                         cell.str(), stage, problem.name, n));
        for (int stage : {fStage, bStage})
          if (firstRow[stage] < 0)
            firstRow[stage] = r;
        schedule.ranks.back().push_back(
            Action::overlapped(fStage, fMb, bStage, bMb));
        result.positions.back().push_back(pos);
        cells.back().push_back({false, "OVERLAP_F_B", fStage, fMb, pos});
      } else if (cell.contains("WAIT_SEND_")) {
        // torch's send retirement: carries no dependency, checked for form.
        int stage = 0, mb = 0;
        size_t at = cell.find("WAIT_SEND_");
        llvm::StringRef kindText = cell.substr(at, 11);
        if (!parseIndex(cell.take_front(at), stage) ||
            (kindText != "WAIT_SEND_F" && kindText != "WAIT_SEND_B") ||
            !parseIndex(cell.drop_front(at + 11), mb))
          return fail(pos, fmt::format("bad action '{}': expected "
                                       "<stage>WAIT_SEND_F<microbatch> or "
                                       "<stage>WAIT_SEND_B<microbatch>",
                                       cell.str()));
      } else if (llvm::StringRef kindText = cell.drop_while(llvm::isDigit);
                 kindText == "REDUCE_GRAD" || kindText == "WAIT_REDUCE_GRAD" ||
                 kindText == "UNSHARD" || kindText == "RESHARD") {
        // torch's data-parallel cells: no pipeline dependency, checked for
        // form.
        int stage = 0;
        if (!parseIndex(cell.drop_back(kindText.size()), stage))
          return fail(pos, fmt::format("bad action '{}': expected "
                                       "<stage>{}",
                                       cell.str(), kindText.str()));
        if (stage >= n)
          return fail(pos, fmt::format("action '{}' names stage {}, pipeline "
                                       "@{} has {} stages",
                                       cell.str(), stage, problem.name, n));
      } else if (!cell.empty()) {
        // A cell of digits only has no kind letter: npos would overrun.
        size_t digits = std::min(cell.find_if_not(llvm::isDigit), cell.size());
        llvm::StringRef stageText = cell.take_front(digits);
        llvm::StringRef rest = cell.drop_front(digits);
        size_t tail = rest.find_if(llvm::isDigit);
        llvm::StringRef kindText = rest.take_front(tail);
        llvm::StringRef mbText = rest.drop_front(kindText.size());
        int stage = 0, mb = 0;
        bool isComm = kindText == "SEND_F" || kindText == "RECV_F" ||
                      kindText == "SEND_B" || kindText == "RECV_B";
        std::optional<ActionKind> kind;
        if (kindText.size() == 1)
          kind = actionKindFromLetter(kindText.front());
        if (!parseIndex(stageText, stage) || !parseIndex(mbText, mb) ||
            (!kind && !isComm))
          return fail(pos, fmt::format("bad action '{}': expected "
                                       "<stage><F|I|W|B><microbatch>, e.g. "
                                       "0F3",
                                       cell.str()));
        if (stage >= n)
          return fail(pos, fmt::format("action '{}' names stage {}, pipeline "
                                       "@{} has {} stages",
                                       cell.str(), stage, problem.name, n));
        if (kind) {
          if (firstRow[stage] < 0)
            firstRow[stage] = r;
          schedule.ranks.back().push_back({*kind, stage, mb});
          result.positions.back().push_back(pos);
        }
        cells.back().push_back({isComm, kindText.str(), stage, mb, pos});
        anyComm |= isComm;
      }
      if (comma == llvm::StringRef::npos)
        break;
      column = comma + 1;
    }
  }
  if (schedule.numRanks() != problem.ranks)
    return fail({static_cast<int>(lines.size()) + 1, 1},
                fmt::format("CSV has {} rows, pipeline @{} has {} ranks",
                            schedule.numRanks(), problem.name, problem.ranks));

  // Stages that never appear keep the default block placement, so that the
  // verifier reports their actions as missing rather than misplaced.
  llvm::Expected<std::vector<int>> fallback =
      placeContiguous(problem, /*requireContiguous=*/false);
  if (!fallback)
    return fallback.takeError();
  schedule.placement = std::move(*fallback);
  for (int s = 0; s < n; ++s) {
    if (problem.stages[s].rank)
      schedule.placement[s] = *problem.stages[s].rank;
    else if (firstRow[s] >= 0)
      schedule.placement[s] = firstRow[s];
  }
  if (!anyComm)
    return result;

  Program program;
  program.placement = schedule.placement;
  for (int r = 0; r < problem.ranks; ++r) {
    program.ranks.emplace_back();
    result.instructionPositions.emplace_back();
    size_t action = 0;
    for (const Cell &c : cells[r]) {
      result.instructionPositions.back().push_back(c.pos);
      if (!c.isComm) {
        program.ranks.back().push_back(
            Instruction::compute(schedule.ranks[r][action++]));
        continue;
      }
      bool send = llvm::StringRef(c.kind).starts_with("SEND");
      bool act = llvm::StringRef(c.kind).ends_with("_F");
      // Back from PyTorch's stage naming to the producing stage.
      int producer = send ? c.stage : (act ? c.stage - 1 : c.stage + 1);
      int consumer = act ? producer + 1 : producer - 1;
      if (producer < 0 || producer >= n || consumer < 0 || consumer >= n)
        return fail(c.pos, fmt::format("'{}{}{}' moves data past the end of "
                                       "the pipeline",
                                       c.stage, c.kind, c.mb));
      int peer = program.placement[send ? consumer : producer];
      program.ranks.back().push_back(Instruction::comm(
          {send,
           peer,
           {act ? MessageKind::Activation : MessageKind::Gradient, producer,
            c.mb}}));
    }
  }
  result.program = std::move(program);
  return result;
}

llvm::Expected<std::vector<int>>
stagecraft::pipe::sched::torchCheckpointStages(const Problem &problem,
                                               const Schedule &schedule) {
  std::vector<int> full;
  for (int s = 0; s < problem.numStages(); ++s) {
    std::vector<int> recomputed;
    bool selective = false;
    for (int m = 0; m < problem.microbatches; ++m) {
      Recompute mode = schedule.recompute.at(s, m);
      selective |= mode == Recompute::Selective;
      if (mode == Recompute::Full)
        recomputed.push_back(m);
    }
    auto fail = [](std::string message) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
    };
    if (selective)
      return fail(fmt::format(
          "stage {} (@{}) recomputes selectively; torch runs full "
          "recomputation only (torch.utils.checkpoint): schedule with "
          "recompute=full or none for torch",
          s, problem.stages[s].name));
    if (recomputed.empty())
      continue;
    if (static_cast<int>(recomputed.size()) == problem.microbatches) {
      full.push_back(s);
      continue;
    }
    return fail(fmt::format(
        "stage {} (@{}) recomputes microbatches [{}] and keeps the others; "
        "torch's runtime runs one module for every microbatch, so it cannot "
        "mix: schedule with recompute=full (every forward) or none for "
        "torch, or run the mix with stagecraft-run",
        s, problem.stages[s].name, fmt::join(recomputed, ", ")));
  }
  return full;
}
