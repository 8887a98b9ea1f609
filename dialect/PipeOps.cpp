//===- PipeOps.cpp - pipe dialect operations ------------------------------===//
//
// Custom syntax of `pipe.pipeline`, `pipe.stage`, `pipe.device` and
// `pipe.layer`: their parsers and printers. The verifiers are in
// PipeVerify.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeOps.h"
#include "dialect/PipeModel.h"
#include "dialect/PipeOpsDetail.h"

#include "scheduler/model/TaskGraph.h"

#include <limits>

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <fmt/format.h>

#include <cmath>

using namespace mlir;
using namespace stagecraft::pipe;
using stagecraft::pipe::detail::formatNumber;

//===----------------------------------------------------------------------===//
// Numbers
//===----------------------------------------------------------------------===//

/// Parses a cost or memory value: a float or integer literal, or `inf` /
/// `nan` so that non-finite values reach the verifier and get a clear error.
static ParseResult parseNumber(OpAsmParser &parser, double &value) {
  if (succeeded(parser.parseOptionalKeyword("inf"))) {
    value = INFINITY;
    return success();
  }
  if (succeeded(parser.parseOptionalKeyword("nan"))) {
    value = NAN;
    return success();
  }
  SMLoc loc = parser.getCurrentLocation();
  Attribute attr;
  if (parser.parseAttribute(attr))
    return failure();
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    value = f.getValueAsDouble();
    return success();
  }
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    value = static_cast<double>(i.getValue().getSExtValue());
    return success();
  }
  return parser.emitError(loc, "expected a number");
}

/// Shortest exact decimal form that MLIR's lexer reads back as a float.
std::string stagecraft::pipe::detail::formatNumber(double value) {
  std::string text = fmt::format("{}", value);
  if (!std::isfinite(value) || text.find_first_of(".") != std::string::npos)
    return text;
  size_t exponent = text.find('e');
  if (exponent == std::string::npos)
    return text + ".0";
  return text.insert(exponent, ".0");
}

/// Parses `keyword(name = number, ...)` into \p values, whose keys are the
/// accepted names. Fails on an unknown, repeated or missing (when \p
/// required) name.
static ParseResult parseNamedNumbers(
    OpAsmParser &parser, StringRef keyword,
    llvm::MutableArrayRef<std::pair<StringRef, std::optional<double>>> values,
    bool required) {
  SMLoc listLoc = parser.getCurrentLocation();
  auto parseEntry = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    StringRef name;
    double value;
    if (parser.parseKeyword(&name) || parser.parseEqual() ||
        parseNumber(parser, value))
      return failure();
    for (auto &[key, slot] : values) {
      if (key != name)
        continue;
      if (slot)
        return parser.emitError(loc)
               << "'" << name << "' appears twice in " << keyword << "(...)";
      slot = value;
      return success();
    }
    std::string known;
    for (auto &entry : values)
      known += (known.empty() ? "" : ", ") + entry.first.str();
    return parser.emitError(loc) << "unknown " << keyword << " '" << name
                                 << "'; expected one of: " << known;
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, parseEntry))
    return failure();
  if (required)
    for (auto &[key, slot] : values)
      if (!slot)
        return parser.emitError(listLoc)
               << keyword << "(...) needs '" << key << "'";
  return success();
}

/// `keyword(N)`, when present, as the i64 attribute \p attrName.
static ParseResult parseOptionalInteger(OpAsmParser &parser,
                                        OperationState &result,
                                        StringRef keyword,
                                        StringAttr attrName) {
  if (failed(parser.parseOptionalKeyword(keyword)))
    return success();
  int64_t value;
  if (parser.parseLParen() || parser.parseInteger(value) ||
      parser.parseRParen())
    return failure();
  result.addAttribute(attrName, parser.getBuilder().getI64IntegerAttr(value));
  return success();
}

/// ` cost(forward = F, backward_input = I, backward_weight = W` and
/// ` memory(activation = A, weight_grad = G`, each left open for the
/// op's further entries.
static void printCostsOpen(OpAsmPrinter &p, APFloat f, APFloat i, APFloat w) {
  p << " cost(forward = " << formatNumber(f.convertToDouble())
    << ", backward_input = " << formatNumber(i.convertToDouble())
    << ", backward_weight = " << formatNumber(w.convertToDouble());
}
static void printMemoryOpen(OpAsmPrinter &p, APFloat a, APFloat g) {
  p << " memory(activation = " << formatNumber(a.convertToDouble())
    << ", weight_grad = " << formatNumber(g.convertToDouble());
}

//===----------------------------------------------------------------------===//
// PipelineOp
//===----------------------------------------------------------------------===//

/// data_parallel(degree = N, sharding = none|full|hybrid, shard_group = G,
/// latency = L, bandwidth = B, inter_latency = L2, inter_bandwidth = B2,
/// optimizer = T): N is required; every entry at most once, in any order.
static ParseResult parseDataParallel(OpAsmParser &parser,
                                     OperationState &result, SMLoc loc) {
  Builder &b = parser.getBuilder();
  OperationName op = result.name;
  if (result.attributes.get(PipelineOp::getDpDegreeAttrName(op)))
    return parser.emitError(loc) << "data_parallel(...) appears twice";
  static constexpr StringRef kNumbers[] = {
      "latency", "bandwidth", "inter_latency", "inter_bandwidth", "optimizer"};
  StringAttr numberAttrs[] = {PipelineOp::getDpLatencyAttrName(op),
                              PipelineOp::getDpBandwidthAttrName(op),
                              PipelineOp::getDpInterLatencyAttrName(op),
                              PipelineOp::getDpInterBandwidthAttrName(op),
                              PipelineOp::getDpOptimizerAttrName(op)};
  llvm::SmallVector<StringRef> seen;
  auto parseEntry = [&]() -> ParseResult {
    SMLoc entryLoc = parser.getCurrentLocation();
    StringRef name;
    if (parser.parseKeyword(&name) || parser.parseEqual())
      return failure();
    if (llvm::is_contained(seen, name))
      return parser.emitError(entryLoc)
             << "'" << name << "' appears twice in data_parallel(...)";
    seen.push_back(name);
    if (name == "degree" || name == "shard_group") {
      int64_t value;
      if (parser.parseInteger(value))
        return failure();
      result.addAttribute(name == "degree"
                              ? PipelineOp::getDpDegreeAttrName(op)
                              : PipelineOp::getDpShardGroupAttrName(op),
                          b.getI64IntegerAttr(value));
      return success();
    }
    if (name == "sharding") {
      StringRef mode;
      if (parser.parseKeyword(&mode))
        return failure();
      result.addAttribute(PipelineOp::getDpShardingAttrName(op),
                          b.getStringAttr(mode));
      return success();
    }
    for (auto [key, attrName] : llvm::zip(kNumbers, numberAttrs)) {
      if (key != name)
        continue;
      double value;
      if (parseNumber(parser, value))
        return failure();
      result.addAttribute(attrName, b.getF64FloatAttr(value));
      return success();
    }
    return parser.emitError(entryLoc)
           << "unknown data_parallel entry '" << name
           << "'; expected one of: degree, sharding, shard_group, latency, "
              "bandwidth, inter_latency, inter_bandwidth, optimizer";
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, parseEntry))
    return failure();
  if (!llvm::is_contained(seen, "degree"))
    return parser.emitError(loc) << "data_parallel(...) needs 'degree'";
  return success();
}

ParseResult PipelineOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  StringAttr name;
  int64_t ranks, microbatches;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes) ||
      parser.parseKeyword("ranks") || parser.parseLParen() ||
      parser.parseInteger(ranks) || parser.parseRParen() ||
      parser.parseKeyword("microbatches") || parser.parseLParen() ||
      parser.parseInteger(microbatches) || parser.parseRParen())
    return failure();
  result.addAttribute(getRanksAttrName(result.name),
                      b.getI64IntegerAttr(ranks));
  result.addAttribute(getMicrobatchesAttrName(result.name),
                      b.getI64IntegerAttr(microbatches));
  // `devices(...)`, `latency(X)` and `capacity(X)`, each at most once, in
  // any order.
  for (;;) {
    SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (failed(parser.parseOptionalKeyword(
            &keyword, {"latency", "capacity", "devices", "links", "lengths",
                       "reference_length", "data_parallel"})))
      break;
    if (keyword == "data_parallel") {
      if (failed(parseDataParallel(parser, result, loc)))
        return failure();
      continue;
    }
    if (keyword == "lengths") {
      // lengths(l0, l1, ...): each microbatch's sequence length.
      if (result.attributes.get(getLengthsAttrName(result.name)))
        return parser.emitError(loc) << "lengths(...) appears twice";
      SmallVector<double> lengths;
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren,
                                         [&]() -> ParseResult {
                                           double value;
                                           if (parseNumber(parser, value))
                                             return failure();
                                           lengths.push_back(value);
                                           return success();
                                         }))
        return failure();
      result.addAttribute(getLengthsAttrName(result.name),
                          b.getDenseF64ArrayAttr(lengths));
      continue;
    }
    if (keyword == "reference_length") {
      if (result.attributes.get(getReferenceLengthAttrName(result.name)))
        return parser.emitError(loc) << "reference_length(...) appears twice";
      double value;
      if (parser.parseLParen() || parseNumber(parser, value) ||
          parser.parseRParen())
        return failure();
      result.addAttribute(getReferenceLengthAttrName(result.name),
                          b.getF64FloatAttr(value));
      continue;
    }
    if (keyword == "links") {
      // links(node = N, intra = (latency = L, bandwidth = B), inter = (...))
      if (result.attributes.get(getLinksNodeAttrName(result.name)))
        return parser.emitError(loc) << "links(...) appears twice";
      std::optional<int64_t> node;
      std::pair<StringRef, std::optional<double>> intra[] = {
          {"latency", std::nullopt}, {"bandwidth", std::nullopt}};
      std::pair<StringRef, std::optional<double>> inter[] = {
          {"latency", std::nullopt}, {"bandwidth", std::nullopt}};
      bool seenIntra = false, seenInter = false;
      auto parseEntry = [&]() -> ParseResult {
        SMLoc entryLoc = parser.getCurrentLocation();
        StringRef name;
        if (parser.parseKeyword(&name) || parser.parseEqual())
          return failure();
        if (name == "node") {
          int64_t value;
          if (node)
            return parser.emitError(entryLoc)
                   << "'node' appears twice in links(...)";
          if (parser.parseInteger(value))
            return failure();
          node = value;
          return success();
        }
        if (name == "intra" || name == "inter") {
          bool &seen = name == "intra" ? seenIntra : seenInter;
          if (seen)
            return parser.emitError(entryLoc)
                   << "'" << name << "' appears twice in links(...)";
          seen = true;
          return parseNamedNumbers(parser, name,
                                   name == "intra" ? intra : inter,
                                   /*required=*/true);
        }
        return parser.emitError(entryLoc)
               << "unknown links entry '" << name
               << "'; expected one of: node, intra, inter";
      };
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren,
                                         parseEntry))
        return failure();
      if (!node || !seenIntra || !seenInter)
        return parser.emitError(loc)
               << "links(...) needs node = N, intra = (latency = L, "
                  "bandwidth = B) and inter = (latency = L, bandwidth = B)";
      result.addAttribute(getLinksNodeAttrName(result.name),
                          b.getI64IntegerAttr(*node));
      result.addAttribute(getIntraLatencyAttrName(result.name),
                          b.getF64FloatAttr(*intra[0].second));
      result.addAttribute(getIntraBandwidthAttrName(result.name),
                          b.getF64FloatAttr(*intra[1].second));
      result.addAttribute(getInterLatencyAttrName(result.name),
                          b.getF64FloatAttr(*inter[0].second));
      result.addAttribute(getInterBandwidthAttrName(result.name),
                          b.getF64FloatAttr(*inter[1].second));
      continue;
    }
    StringAttr attrName = keyword == "latency" ? getLatencyAttrName(result.name)
                          : keyword == "capacity"
                              ? getCapacityAttrName(result.name)
                              : getDevicesAttrName(result.name);
    if (result.attributes.get(attrName))
      return parser.emitError(loc) << keyword << "(...) appears twice";
    if (keyword == "devices") {
      // `@name x N` groups, ranks in order.
      SmallVector<Attribute> perRank;
      auto parseGroup = [&]() -> ParseResult {
        SMLoc groupLoc = parser.getCurrentLocation();
        StringAttr device;
        int64_t count = 1;
        if (parser.parseSymbolName(device))
          return failure();
        if (succeeded(parser.parseOptionalKeyword("x")) &&
            parser.parseInteger(count))
          return failure();
        if (count < 1 || count > std::numeric_limits<int32_t>::max())
          return parser.emitError(groupLoc)
                 << "devices(...): @" << device.getValue() << " x " << count
                 << ": the count must be at least 1";
        if (static_cast<int64_t>(perRank.size()) + count > ranks)
          return parser.emitError(groupLoc)
                 << "devices(...) assigns more than the pipeline's " << ranks
                 << " ranks";
        for (int64_t k = 0; k < count; ++k)
          perRank.push_back(FlatSymbolRefAttr::get(device));
        return success();
      };
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren,
                                         parseGroup))
        return failure();
      if (static_cast<int64_t>(perRank.size()) != ranks)
        return parser.emitError(loc)
               << "devices(...) assigns " << perRank.size()
               << " ranks; the pipeline has " << ranks;
      result.addAttribute(attrName, b.getArrayAttr(perRank));
      continue;
    }
    double value;
    if (parser.parseLParen() || parseNumber(parser, value) ||
        parser.parseRParen())
      return failure();
    result.addAttribute(attrName, b.getF64FloatAttr(value));
  }
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  if (parser.parseRegion(*body))
    return failure();
  if (body->empty())
    body->emplaceBlock();
  return success();
}

void PipelineOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << " ranks(" << getRanks() << ") microbatches(" << getMicrobatches() << ")";
  if (std::optional<ArrayRef<double>> lengths = getLengths()) {
    p << " lengths(";
    llvm::interleaveComma(*lengths, p, [&](double l) { p << formatNumber(l); });
    p << ")";
  }
  if (FloatAttr reference = getReferenceLengthAttr())
    p << " reference_length(" << formatNumber(reference.getValueAsDouble())
      << ")";
  if (getLatency().convertToDouble() != 0.0)
    p << " latency(" << formatNumber(getLatency().convertToDouble()) << ")";
  if (FloatAttr capacity = getCapacityAttr())
    p << " capacity(" << formatNumber(capacity.getValueAsDouble()) << ")";
  if (ArrayAttr devices = getDevicesAttr()) {
    // Runs of one device as `@name x N`.
    p << " devices(";
    for (size_t i = 0, e = devices.size(); i < e;) {
      size_t j = i;
      while (j < e && devices[j] == devices[i])
        ++j;
      if (i)
        p << ", ";
      p << devices[i];
      if (j - i > 1)
        p << " x " << (j - i);
      i = j;
    }
    p << ")";
  }
  if (IntegerAttr node = getLinksNodeAttr()) {
    auto value = [](FloatAttr a) {
      return formatNumber(a ? a.getValueAsDouble() : 0.0);
    };
    p << " links(node = " << node.getInt()
      << ", intra = (latency = " << value(getIntraLatencyAttr())
      << ", bandwidth = " << value(getIntraBandwidthAttr())
      << "), inter = (latency = " << value(getInterLatencyAttr())
      << ", bandwidth = " << value(getInterBandwidthAttr()) << "))";
  }
  if (IntegerAttr degree = getDpDegreeAttr()) {
    p << " data_parallel(degree = " << degree.getInt();
    if (StringAttr sharding = getDpShardingAttr())
      p << ", sharding = " << sharding.getValue();
    if (IntegerAttr group = getDpShardGroupAttr())
      p << ", shard_group = " << group.getInt();
    for (auto [name, attr] : dataParallelNumbers())
      if (attr)
        p << ", " << name << " = " << formatNumber(attr.getValueAsDouble());
    p << ")";
  }
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(),         getRanksAttrName(),
       getMicrobatchesAttrName(),    getLatencyAttrName(),
       getCapacityAttrName(),        getDevicesAttrName(),
       getLinksNodeAttrName(),       getIntraLatencyAttrName(),
       getIntraBandwidthAttrName(),  getInterLatencyAttrName(),
       getInterBandwidthAttrName(),  getLengthsAttrName(),
       getReferenceLengthAttrName(), getDpDegreeAttrName(),
       getDpShardingAttrName(),      getDpShardGroupAttrName(),
       getDpLatencyAttrName(),       getDpBandwidthAttrName(),
       getDpInterLatencyAttrName(),  getDpInterBandwidthAttrName(),
       getDpOptimizerAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/false);
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

ParseResult StageOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();
  // inputs(@a, @b): the stages this one takes outputs from.
  if (succeeded(parser.parseOptionalKeyword("inputs"))) {
    SmallVector<Attribute> refs;
    auto one = [&]() -> ParseResult {
      FlatSymbolRefAttr ref;
      if (parser.parseAttribute(ref))
        return failure();
      refs.push_back(ref);
      return success();
    };
    if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, one))
      return failure();
    result.addAttribute(getInputsAttrName(result.name), b.getArrayAttr(refs));
  }
  if (parseOptionalInteger(parser, result, "rank",
                           getRankAttrName(result.name)) ||
      parseOptionalInteger(parser, result, "layers",
                           getLayersAttrName(result.name)))
    return failure();
  std::pair<StringRef, std::optional<double>> costs[] = {
      {"forward", std::nullopt},
      {"backward_input", std::nullopt},
      {"backward_weight", std::nullopt},
      {"forward_backward", std::nullopt},
      {"selective", std::nullopt}};
  SMLoc costLoc = parser.getCurrentLocation();
  if (parser.parseKeyword("cost") ||
      parseNamedNumbers(parser, "cost", costs, /*required=*/false))
    return failure();
  for (int i = 0; i < 3; ++i)
    if (!costs[i].second)
      return parser.emitError(costLoc)
             << "cost(...) needs '" << costs[i].first << "'";
  auto addOptional = [&](StringAttr attrName, std::optional<double> value) {
    if (value)
      result.addAttribute(attrName, b.getF64FloatAttr(*value));
  };
  addOptional(getForwardBackwardAttrName(result.name), costs[3].second);
  addOptional(getSelectiveCostAttrName(result.name), costs[4].second);
  result.addAttribute(getForwardAttrName(result.name),
                      b.getF64FloatAttr(*costs[0].second));
  result.addAttribute(getBackwardInputAttrName(result.name),
                      b.getF64FloatAttr(*costs[1].second));
  result.addAttribute(getBackwardWeightAttrName(result.name),
                      b.getF64FloatAttr(*costs[2].second));
  std::pair<StringRef, std::optional<double>> memory[] = {
      {"activation", std::nullopt},
      {"weight_grad", std::nullopt},
      {"recomputed", std::nullopt},
      {"selective", std::nullopt}};
  std::pair<StringRef, std::optional<double>> attention[] = {
      {"forward", std::nullopt},
      {"backward", std::nullopt},
      {"memory", std::nullopt}};
  std::optional<double> params;
  // memory(...), params(X) and attention(...), each at most once, in any
  // order.
  llvm::SmallVector<StringRef, 3> seen;
  for (;;) {
    SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (failed(parser.parseOptionalKeyword(&keyword,
                                           {"memory", "params", "attention",
                                            "output", "scaling", "gradient"})))
      break;
    if (llvm::is_contained(seen, keyword))
      return parser.emitError(loc) << keyword << "(...) appears twice";
    seen.push_back(keyword);
    if (keyword == "scaling") {
      std::pair<StringRef, std::optional<double>> scaling[] = {
          {"linear", std::nullopt}, {"quadratic", std::nullopt}};
      if (parseNamedNumbers(parser, "scaling", scaling, /*required=*/false))
        return failure();
      result.addAttribute(getScalingLinearAttrName(result.name),
                          b.getF64FloatAttr(scaling[0].second.value_or(
                              scaling[1].second ? 0.0 : 1.0)));
      result.addAttribute(getScalingQuadraticAttrName(result.name),
                          b.getF64FloatAttr(scaling[1].second.value_or(0.0)));
    } else if (keyword == "memory") {
      if (parseNamedNumbers(parser, "memory", memory, /*required=*/false))
        return failure();
    } else if (keyword == "params" || keyword == "output" ||
               keyword == "gradient") {
      double value;
      if (parser.parseLParen() || parseNumber(parser, value) ||
          parser.parseRParen())
        return failure();
      if (keyword == "params")
        params = value;
      else
        result.addAttribute(keyword == "output"
                                ? getOutputAttrName(result.name)
                                : getGradientAttrName(result.name),
                            b.getF64FloatAttr(value));
    } else {
      if (parseNamedNumbers(parser, "attention", attention,
                            /*required=*/false))
        return failure();
      for (int i = 0; i < 2; ++i)
        if (!attention[i].second)
          return parser.emitError(loc)
                 << "attention(...) needs '" << attention[i].first << "'";
      result.addAttribute(getAttentionForwardAttrName(result.name),
                          b.getF64FloatAttr(*attention[0].second));
      result.addAttribute(getAttentionBackwardAttrName(result.name),
                          b.getF64FloatAttr(*attention[1].second));
      result.addAttribute(getAttentionMemoryAttrName(result.name),
                          b.getF64FloatAttr(attention[2].second.value_or(0.0)));
    }
  }
  double activation = memory[0].second.value_or(1.0);
  result.addAttribute(getActivationAttrName(result.name),
                      b.getF64FloatAttr(activation));
  result.addAttribute(getWeightGradAttrName(result.name),
                      b.getF64FloatAttr(memory[1].second.value_or(activation)));
  addOptional(getRecomputedAttrName(result.name), memory[2].second);
  addOptional(getSelectiveAttrName(result.name), memory[3].second);
  addOptional(getParamsAttrName(result.name), params);
  return parser.parseOptionalAttrDict(result.attributes);
}

void StageOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  if (ArrayAttr inputs = getInputsAttr()) {
    p << " inputs(";
    llvm::interleaveComma(inputs, p, [&](Attribute a) { p << a; });
    p << ")";
  }
  if (std::optional<uint64_t> rank = getRank())
    p << " rank(" << static_cast<int64_t>(*rank) << ")";
  if (IntegerAttr layers = getLayersAttr())
    p << " layers(" << layers.getInt() << ")";
  printCostsOpen(p, getForward(), getBackwardInput(), getBackwardWeight());
  if (FloatAttr fb = getForwardBackwardAttr())
    p << ", forward_backward = " << formatNumber(fb.getValueAsDouble());
  if (FloatAttr c = getSelectiveCostAttr())
    p << ", selective = " << formatNumber(c.getValueAsDouble());
  p << ")";
  printMemoryOpen(p, getActivation(), getWeightGrad());
  if (FloatAttr r = getRecomputedAttr())
    p << ", recomputed = " << formatNumber(r.getValueAsDouble());
  if (FloatAttr sel = getSelectiveAttr())
    p << ", selective = " << formatNumber(sel.getValueAsDouble());
  p << ")";
  if (FloatAttr params = getParamsAttr())
    p << " params(" << formatNumber(params.getValueAsDouble()) << ")";
  if (FloatAttr output = getOutputAttr())
    p << " output(" << formatNumber(output.getValueAsDouble()) << ")";
  if (FloatAttr gradient = getGradientAttr())
    p << " gradient(" << formatNumber(gradient.getValueAsDouble()) << ")";
  if (FloatAttr linear = getScalingLinearAttr())
    p << " scaling(linear = " << formatNumber(linear.getValueAsDouble())
      << ", quadratic = "
      << formatNumber(getScalingQuadraticAttr()
                          ? getScalingQuadraticAttr().getValueAsDouble()
                          : 0.0)
      << ")";
  if (FloatAttr af = getAttentionForwardAttr())
    p << " attention(forward = " << formatNumber(af.getValueAsDouble())
      << ", backward = "
      << formatNumber(getAttentionBackwardAttr().getValueAsDouble())
      << ", memory = "
      << formatNumber(getAttentionMemoryAttr()
                          ? getAttentionMemoryAttr().getValueAsDouble()
                          : 0.0)
      << ")";
  p.printOptionalAttrDict((*this)->getAttrs(), {getSymNameAttrName(),
                                                getInputsAttrName(),
                                                getRankAttrName(),
                                                getLayersAttrName(),
                                                getForwardAttrName(),
                                                getBackwardInputAttrName(),
                                                getBackwardWeightAttrName(),
                                                getForwardBackwardAttrName(),
                                                getActivationAttrName(),
                                                getWeightGradAttrName(),
                                                getRecomputedAttrName(),
                                                getSelectiveAttrName(),
                                                getSelectiveCostAttrName(),
                                                getParamsAttrName(),
                                                getOutputAttrName(),
                                                getScalingLinearAttrName(),
                                                getScalingQuadraticAttrName(),
                                                getAttentionForwardAttrName(),
                                                getAttentionBackwardAttrName(),
                                                getAttentionMemoryAttrName(),
                                                getGradientAttrName()});
}

//===----------------------------------------------------------------------===//
// DeviceOp
//===----------------------------------------------------------------------===//

ParseResult DeviceOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();
  for (;;) {
    SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (failed(parser.parseOptionalKeyword(&keyword, {"speed", "memory"})))
      break;
    StringAttr attrName = keyword == "speed" ? getSpeedAttrName(result.name)
                                             : getMemoryAttrName(result.name);
    if (result.attributes.get(attrName))
      return parser.emitError(loc) << keyword << "(...) appears twice";
    double value;
    if (parser.parseLParen() || parseNumber(parser, value) ||
        parser.parseRParen())
      return failure();
    result.addAttribute(attrName, b.getF64FloatAttr(value));
  }
  return parser.parseOptionalAttrDict(result.attributes);
}

void DeviceOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << " speed(" << formatNumber(getSpeed().convertToDouble()) << ")";
  if (FloatAttr memory = getMemoryAttr())
    p << " memory(" << formatNumber(memory.getValueAsDouble()) << ")";
  p.printOptionalAttrDict(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getSpeedAttrName(), getMemoryAttrName()});
}

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

ParseResult LayerOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();
  if (parseOptionalInteger(parser, result, "count",
                           getCountAttrName(result.name)))
    return failure();
  std::pair<StringRef, std::optional<double>> costs[] = {
      {"forward", std::nullopt},
      {"backward_input", std::nullopt},
      {"backward_weight", std::nullopt}};
  if (parser.parseKeyword("cost") ||
      parseNamedNumbers(parser, "cost", costs, /*required=*/true))
    return failure();
  result.addAttribute(getForwardAttrName(result.name),
                      b.getF64FloatAttr(*costs[0].second));
  result.addAttribute(getBackwardInputAttrName(result.name),
                      b.getF64FloatAttr(*costs[1].second));
  result.addAttribute(getBackwardWeightAttrName(result.name),
                      b.getF64FloatAttr(*costs[2].second));
  std::pair<StringRef, std::optional<double>> memory[] = {
      {"activation", std::nullopt}, {"weight_grad", std::nullopt}};
  // memory(...), params(X), output(X) and gradient(X), each at most once,
  // in any order.
  llvm::SmallVector<StringRef, 4> seen;
  for (;;) {
    SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (failed(parser.parseOptionalKeyword(
            &keyword, {"memory", "params", "output", "gradient"})))
      break;
    if (llvm::is_contained(seen, keyword))
      return parser.emitError(loc) << keyword << "(...) appears twice";
    seen.push_back(keyword);
    if (keyword == "memory") {
      if (parseNamedNumbers(parser, "memory", memory, /*required=*/false))
        return failure();
      continue;
    }
    double value;
    if (parser.parseLParen() || parseNumber(parser, value) ||
        parser.parseRParen())
      return failure();
    result.addAttribute(keyword == "params" ? getParamsAttrName(result.name)
                        : keyword == "output"
                            ? getOutputAttrName(result.name)
                            : getGradientAttrName(result.name),
                        b.getF64FloatAttr(value));
  }
  double activation = memory[0].second.value_or(1.0);
  result.addAttribute(getActivationAttrName(result.name),
                      b.getF64FloatAttr(activation));
  result.addAttribute(getWeightGradAttrName(result.name),
                      b.getF64FloatAttr(memory[1].second.value_or(activation)));
  return parser.parseOptionalAttrDict(result.attributes);
}

void LayerOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  if (getCount() != 1)
    p << " count(" << getCount() << ")";
  printCostsOpen(p, getForward(), getBackwardInput(), getBackwardWeight());
  p << ")";
  printMemoryOpen(p, getActivation(), getWeightGrad());
  p << ")";
  if (FloatAttr params = getParamsAttr())
    p << " params(" << formatNumber(params.getValueAsDouble()) << ")";
  if (FloatAttr output = getOutputAttr())
    p << " output(" << formatNumber(output.getValueAsDouble()) << ")";
  if (FloatAttr gradient = getGradientAttr())
    p << " gradient(" << formatNumber(gradient.getValueAsDouble()) << ")";
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getSymNameAttrName(), getCountAttrName(),
                           getForwardAttrName(), getBackwardInputAttrName(),
                           getBackwardWeightAttrName(), getActivationAttrName(),
                           getWeightGradAttrName(), getParamsAttrName(),
                           getOutputAttrName(), getGradientAttrName()});
}

//===----------------------------------------------------------------------===//
// ScheduleOp
//===----------------------------------------------------------------------===//

#include "dialect/PipeEnums.cpp.inc"

#define GET_OP_CLASSES
#include "dialect/PipeOps.cpp.inc"
