//===- Checkpoint.cpp - Training checkpoints by global parameter ----------===//
//
// See Checkpoint.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace stagecraft::runtime;
namespace kernels = stagecraft::kernels;
namespace fs = llvm::sys::fs;
namespace json = llvm::json;

static constexpr const char *kFormat = "stagecraft-checkpoint";
static constexpr int kVersion = 1;

static llvm::Error fail(std::string message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static std::string stepName(int step) {
  return fmt::format("step-{:08d}", step);
}

std::string stagecraft::runtime::checkpointTempDir(const std::string &dir,
                                                   int step) {
  return dir + "/" + stepName(step) + ".tmp";
}

/// Writes \p bytes to \p path and fsyncs it.
static llvm::Error writeDurably(const std::string &path, const void *data,
                                size_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  const char *p = static_cast<const char *>(data);
  size_t left = bytes;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return fail(fmt::format("cannot write {}: {}", path, std::strerror(e)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    return fail(fmt::format("cannot sync {}: {}", path, std::strerror(errno)));
  return llvm::Error::success();
}

static void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

static uint32_t crcOf(llvm::StringRef bytes) {
  return llvm::crc32(llvm::arrayRefFromStringRef(bytes));
}

llvm::Error stagecraft::runtime::writeCheckpointPart(
    const std::string &dir, int step, int rank,
    llvm::ArrayRef<std::pair<int, kernels::StageModel *>> models,
    llvm::ArrayRef<double> losses) {
  std::string tmp = checkpointTempDir(dir, step);
  if (std::error_code ec = fs::create_directories(tmp))
    return fail(fmt::format("cannot create {}: {}", tmp, ec.message()));
  json::Array files;
  int optimizerSteps = 0;
  for (auto [index, model] : models) {
    optimizerSteps = model->optimizerSteps();
    for (const kernels::Parameter &p : model->parameters()) {
      std::pair<const char *, const std::vector<float> *> parts[] = {
          {"value", &p.value}, {"adam_m", &p.adamM}, {"adam_v", &p.adamV}};
      for (auto [kind, values] : parts) {
        if (values->empty())
          continue;
        std::string name = fmt::format("{}.{}.bin", p.name, kind);
        llvm::StringRef bytes(reinterpret_cast<const char *>(values->data()),
                              values->size() * sizeof(float));
        if (llvm::Error err =
                writeDurably(tmp + "/" + name, bytes.data(), bytes.size()))
          return err;
        files.push_back(json::Object{{"name", name},
                                     {"bytes", int64_t(bytes.size())},
                                     {"crc32", int64_t(crcOf(bytes))}});
      }
    }
  }
  json::Array lossList;
  for (double l : losses)
    lossList.push_back(l);
  json::Object part{{"rank", rank},
                    {"optimizer_steps", optimizerSteps},
                    {"losses", std::move(lossList)},
                    {"files", std::move(files)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(part));
  os.flush();
  std::string partPath = fmt::format("{}/part-{}.json", tmp, rank);
  if (llvm::Error err = writeDurably(partPath, text.data(), text.size()))
    return err;
  syncDirectory(tmp);
  return llvm::Error::success();
}

static json::Object modelObject(const CheckpointModel &m) {
  return json::Object{
      {"hidden", m.model.hidden},      {"heads", m.model.heads},
      {"sequence", m.model.sequence},  {"vocab", m.model.vocab},
      {"batch", m.model.batch},        {"microbatches", m.model.microbatches},
      {"seed", int64_t(m.model.seed)}, {"layers", m.layers}};
}

static const char *optimizerName(kernels::OptimizerConfig::Kind kind) {
  return kind == kernels::OptimizerConfig::Kind::AdamW ? "adamw" : "sgd";
}

/// Complete checkpoints in \p dir, newest first: (step, path).
static std::vector<std::pair<int, std::string>>
completeCheckpoints(const std::string &dir) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    int step = 0;
    if (!name.consume_front("step-") || name.getAsInteger(10, step) || step < 0)
      continue;
    found.push_back({step, it->path()});
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  return found;
}

bool stagecraft::runtime::hasCheckpoint(const std::string &dir) {
  for (auto &[step, path] : completeCheckpoints(dir))
    if (fs::exists(path + "/manifest.json"))
      return true;
  return false;
}

llvm::Error
stagecraft::runtime::finishCheckpoint(const std::string &dir, int step,
                                      int ranks,
                                      const CheckpointModel &expected) {
  std::string tmp = checkpointTempDir(dir, step);
  json::Array files;
  int optimizerSteps = -1;
  std::vector<double> losses(step, 0.0);
  for (int r = 0; r < ranks; ++r) {
    std::string path = fmt::format("{}/part-{}.json", tmp, r);
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
        llvm::MemoryBuffer::getFile(path);
    if (!text)
      return fail(fmt::format("checkpoint of step {}: rank {} wrote no {}",
                              step, r, path));
    llvm::Expected<json::Value> part = json::parse((*text)->getBuffer());
    if (!part)
      return fail(fmt::format("checkpoint of step {}: {}: {}", step, path,
                              llvm::toString(part.takeError())));
    const json::Object *obj = part->getAsObject();
    const json::Array *list = obj ? obj->getArray("files") : nullptr;
    if (!list)
      return fail(
          fmt::format("checkpoint of step {}: {} lists no files", step, path));
    // Every stage of every rank has taken the same optimizer steps.
    int steps =
        static_cast<int>(obj->getInteger("optimizer_steps").value_or(0));
    if (!list->empty())
      optimizerSteps = std::max(optimizerSteps, steps);
    for (const json::Value &f : *list)
      files.push_back(f);
    if (const json::Array *l = obj->getArray("losses"))
      for (size_t k = 0; k < l->size() && k < losses.size(); ++k)
        losses[k] += (*l)[k].getAsNumber().value_or(0.0);
  }
  json::Array lossList;
  for (double l : losses)
    lossList.push_back(l);
  json::Object manifest{{"format", kFormat},
                        {"version", kVersion},
                        {"step", step},
                        {"optimizer_steps", std::max(0, optimizerSteps)},
                        {"losses", std::move(lossList)},
                        {"optimizer", optimizerName(expected.optimizer)},
                        {"model", modelObject(expected)},
                        {"files", std::move(files)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(manifest));
  os.flush();
  if (llvm::Error err =
          writeDurably(tmp + "/manifest.json", text.data(), text.size()))
    return err;
  syncDirectory(tmp);
  std::string final = dir + "/" + stepName(step);
  if (fs::exists(final))
    if (std::error_code ec = fs::remove_directories(final))
      return fail(fmt::format("cannot replace {}: {}", final, ec.message()));
  if (std::error_code ec = fs::rename(tmp, final))
    return fail(
        fmt::format("cannot rename {} to {}: {}", tmp, final, ec.message()));
  syncDirectory(dir);
  // Keep this one and the previous complete one.
  std::vector<std::pair<int, std::string>> all = completeCheckpoints(dir);
  for (size_t k = 2; k < all.size(); ++k)
    (void)fs::remove_directories(all[k].second);
  return llvm::Error::success();
}

/// Reads and validates the checkpoint at \p path.
static llvm::Expected<Checkpoint> readOne(const std::string &path,
                                          const CheckpointModel &expected) {
  std::string manifestPath = path + "/manifest.json";
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(manifestPath);
  if (!text)
    return fail(fmt::format("{}: missing (the checkpoint was not completed)",
                            manifestPath));
  llvm::Expected<json::Value> parsed = json::parse((*text)->getBuffer());
  if (!parsed)
    return fail(fmt::format("{}: not JSON (truncated?): {}", manifestPath,
                            llvm::toString(parsed.takeError())));
  const json::Object *m = parsed->getAsObject();
  if (!m || m->getString("format") != llvm::StringRef(kFormat))
    return fail(fmt::format("{}: not a stagecraft checkpoint", manifestPath));
  if (m->getInteger("version") != kVersion)
    return fail(fmt::format("{}: version {}, this runtime reads version {}",
                            manifestPath, m->getInteger("version").value_or(-1),
                            kVersion));
  const json::Object *model = m->getObject("model");
  json::Object want = modelObject(expected);
  if (!model)
    return fail(fmt::format("{}: no model sizes", manifestPath));
  for (const auto &[key, value] : want) {
    std::optional<int64_t> have = model->getInteger(key);
    if (!have || *have != *value.getAsInteger())
      return fail(fmt::format("{}: the checkpoint's model has {} = {}, this "
                              "run {}",
                              manifestPath, key.str(),
                              have ? std::to_string(*have) : "nothing",
                              *value.getAsInteger()));
  }
  std::optional<llvm::StringRef> optimizer = m->getString("optimizer");
  if (optimizer != llvm::StringRef(optimizerName(expected.optimizer)))
    return fail(fmt::format("{}: the checkpoint's optimizer is {}, this run "
                            "uses {}",
                            manifestPath, optimizer.value_or("unknown").str(),
                            optimizerName(expected.optimizer)));
  Checkpoint c;
  c.path = path;
  c.step = static_cast<int>(m->getInteger("step").value_or(-1));
  c.optimizerSteps =
      static_cast<int>(m->getInteger("optimizer_steps").value_or(0));
  if (c.step < 0)
    return fail(fmt::format("{}: no step", manifestPath));
  if (const json::Array *l = m->getArray("losses"))
    for (const json::Value &v : *l)
      c.losses.push_back(v.getAsNumber().value_or(0.0));
  const json::Array *files = m->getArray("files");
  if (!files || files->empty())
    return fail(fmt::format("{}: lists no files", manifestPath));
  for (const json::Value &f : *files) {
    const json::Object *o = f.getAsObject();
    std::optional<llvm::StringRef> name =
        o ? o->getString("name") : std::nullopt;
    std::optional<int64_t> bytes = o ? o->getInteger("bytes") : std::nullopt;
    std::optional<int64_t> crc = o ? o->getInteger("crc32") : std::nullopt;
    if (!name || !bytes || !crc || name->contains('/'))
      return fail(fmt::format("{}: a malformed file entry", manifestPath));
    std::string filePath = path + "/" + name->str();
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> data =
        llvm::MemoryBuffer::getFile(filePath, /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
    if (!data)
      return fail(fmt::format("{}: missing", filePath));
    llvm::StringRef b = (*data)->getBuffer();
    if (static_cast<int64_t>(b.size()) != *bytes)
      return fail(fmt::format("{}: {} bytes, the manifest says {} (truncated?)",
                              filePath, b.size(), *bytes));
    if (crcOf(b) != static_cast<uint32_t>(*crc))
      return fail(fmt::format("{}: checksum mismatch (corrupted)", filePath));
    std::vector<float> &values = c.files[name->str()];
    values.resize(b.size() / sizeof(float));
    std::memcpy(values.data(), b.data(), values.size() * sizeof(float));
  }
  return c;
}

llvm::Expected<Checkpoint>
stagecraft::runtime::loadCheckpoint(const std::string &dir,
                                    const CheckpointModel &expected) {
  std::vector<std::pair<int, std::string>> all = completeCheckpoints(dir);
  std::vector<std::string> skipped;
  for (auto &[step, path] : all) {
    llvm::Expected<Checkpoint> c = readOne(path, expected);
    if (c) {
      c->skipped = std::move(skipped);
      return c;
    }
    skipped.push_back(llvm::toString(c.takeError()));
  }
  if (skipped.empty())
    return fail(fmt::format("--resume: no checkpoint in {}", dir));
  std::string why;
  for (const std::string &s : skipped)
    why += "; " + s;
  return fail(fmt::format("--resume: no valid checkpoint in {}{}", dir, why));
}

llvm::Error stagecraft::runtime::restoreCheckpoint(
    const Checkpoint &checkpoint,
    llvm::ArrayRef<std::pair<int, kernels::StageModel *>> models) {
  for (auto [index, model] : models) {
    model->setOptimizerSteps(checkpoint.optimizerSteps);
    for (kernels::Parameter &p : model->parameters()) {
      std::pair<const char *, std::vector<float> *> parts[] = {
          {"value", &p.value}, {"adam_m", &p.adamM}, {"adam_v", &p.adamV}};
      for (auto [kind, values] : parts) {
        std::string name = fmt::format("{}.{}.bin", p.name, kind);
        auto it = checkpoint.files.find(name);
        if (it == checkpoint.files.end()) {
          if (std::strcmp(kind, "value") == 0)
            return fail(fmt::format("{}: holds no {}", checkpoint.path, name));
          values->clear(); // no AdamW state yet
          continue;
        }
        if (it->second.size() != p.value.size())
          return fail(fmt::format("{}: {} has {} values, the model's {} has {}",
                                  checkpoint.path, name, it->second.size(),
                                  p.name, p.value.size()));
        *values = it->second;
      }
    }
  }
  return llvm::Error::success();
}
