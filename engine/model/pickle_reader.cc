#include "engine/model/pickle_reader.h"

#include <array>
#include <bit>
#include <cstring>
#include <deque>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dflash {
namespace {

// Largest data.pkl read, and most objects it may create: a state dict pickle takes about a
// hundred bytes and fifteen objects per tensor, so these leave room for 250,000 tensors while
// bounding the memory a hostile pickle can make the reader use (about 100 bytes an object).
constexpr size_t kMaxPickleBytes = size_t{64} << 20;
constexpr size_t kMaxObjects = size_t{4} << 20;

// The pickle opcodes of protocol 2 that Python's pickler writes for a state dict.
enum Opcode : uint8_t {
  kMark = '(',
  kStop = '.',
  kBinFloat = 'G',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kEmptyList = ']',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kSetItems = 'u',
  kEmptyDict = '}',
  kEmptyTuple = ')',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
};

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor,
};

absl::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kGlobal:
      return "global";
    case Kind::kStorage:
      return "storage";
    case Kind::kTensor:
      return "tensor";
  }
  return "object";
}

// What an allowed global does when the pickle calls it (REDUCE) or names it in a persistent id.
enum class Callable : uint8_t {
  kOrderedDict,       // collections.OrderedDict(): an empty dict.
  kRebuildTensorV2,   // (storage, offset, size, stride, requires_grad, hooks[, metadata])
  kRebuildTensor,     // (storage, offset, size, stride)
  kRebuildParameter,  // (tensor, requires_grad, hooks): the tensor.
  kSize,              // torch.Size(tuple): the tuple.
  kStorageType,       // Only named in persistent ids; never called.
};

struct AllowedGlobal {
  absl::string_view module;
  absl::string_view name;
  Callable callable;
  DType dtype;  // Of kStorageType.
};

constexpr std::array<AllowedGlobal, 17> kAllowedGlobals = {{
    {"collections", "OrderedDict", Callable::kOrderedDict, DType::kF32},
    {"torch._utils", "_rebuild_tensor_v2", Callable::kRebuildTensorV2, DType::kF32},
    {"torch._utils", "_rebuild_tensor", Callable::kRebuildTensor, DType::kF32},
    {"torch._utils", "_rebuild_parameter", Callable::kRebuildParameter, DType::kF32},
    {"torch", "Size", Callable::kSize, DType::kF32},
    {"torch", "FloatStorage", Callable::kStorageType, DType::kF32},
    {"torch", "HalfStorage", Callable::kStorageType, DType::kF16},
    {"torch", "BFloat16Storage", Callable::kStorageType, DType::kBF16},
    {"torch", "DoubleStorage", Callable::kStorageType, DType::kF64},
    {"torch", "LongStorage", Callable::kStorageType, DType::kI64},
    {"torch", "IntStorage", Callable::kStorageType, DType::kI32},
    {"torch", "ShortStorage", Callable::kStorageType, DType::kI16},
    {"torch", "CharStorage", Callable::kStorageType, DType::kI8},
    {"torch", "ByteStorage", Callable::kStorageType, DType::kU8},
    {"torch", "BoolStorage", Callable::kStorageType, DType::kBool},
    // Raw bytes: what torch.save names for an untyped storage saved on its own.
    {"torch", "UntypedStorage", Callable::kStorageType, DType::kU8},
    {"torch.storage", "UntypedStorage", Callable::kStorageType, DType::kU8},
}};

using ObjectId = uint32_t;

struct Object {
  Kind kind = Kind::kNone;
  int64_t integer = 0;  // kBool and kInt; the index of the storage or tensor for those kinds.
  double real = 0;      // kFloat.
  std::string text;     // kString; "module.name" for kGlobal.
  const AllowedGlobal* global = nullptr;
  std::vector<ObjectId> items;  // kTuple and kList; key, value, key, value, ... for kDict.
};

Object Scalar(Kind kind, int64_t integer = 0) {
  Object object;
  object.kind = kind;
  object.integer = integer;
  return object;
}

Object Real(double value) {
  Object object = Scalar(Kind::kFloat);
  object.real = value;
  return object;
}

Object Text(std::string text) {
  Object object = Scalar(Kind::kString);
  object.text = std::move(text);
  return object;
}

Object Sequence(Kind kind, std::vector<ObjectId> items) {
  Object object = Scalar(kind);
  object.items = std::move(items);
  return object;
}

Object GlobalObject(std::string name, const AllowedGlobal* global) {
  Object object = Text(std::move(name));
  object.kind = Kind::kGlobal;
  object.global = global;
  return object;
}

class Unpickler {
 public:
  Unpickler(absl::string_view data, absl::string_view source) : data_(data), source_(source) {}

  absl::StatusOr<PickledStateDict> Run() {
    if (data_.size() > kMaxPickleBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": pickle of ", data_.size(), " bytes exceeds the limit of ", kMaxPickleBytes));
    }
    while (position_ < data_.size()) {
      opcode_offset_ = position_;
      const auto opcode = static_cast<uint8_t>(data_[position_++]);
      if (opcode == kStop) {
        DFLASH_ASSIGN_OR_RETURN(const ObjectId root, Pop());
        return Finish(root);
      }
      DFLASH_RETURN_IF_ERROR(Step(opcode));
    }
    opcode_offset_ = position_;
    return Error("the pickle ends without a STOP opcode (truncated?)");
  }

 private:
  absl::Status Error(absl::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": pickle byte ", opcode_offset_, ": ", problem));
  }

  absl::Status Step(uint8_t opcode) {
    switch (opcode) {
      case kProto: {
        DFLASH_ASSIGN_OR_RETURN(const uint64_t version, TakeUnsigned(1));
        if (version > 2) {
          return Error(absl::StrCat("pickle protocol ", version,
                                    " is not supported; torch.save writes protocol 2 (re-save "
                                    "without pickle_protocol)"));
        }
        return absl::OkStatus();
      }
      case kMark:
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case kNone:
        return Push(Scalar(Kind::kNone));
      case kNewTrue:
      case kNewFalse:
        return Push(Scalar(Kind::kBool, opcode == kNewTrue));
      case kBinInt: {
        DFLASH_ASSIGN_OR_RETURN(const uint64_t bits, TakeUnsigned(4));
        return PushInt(static_cast<int32_t>(static_cast<uint32_t>(bits)));
      }
      case kBinInt1:
      case kBinInt2: {
        DFLASH_ASSIGN_OR_RETURN(const uint64_t value, TakeUnsigned(opcode == kBinInt1 ? 1 : 2));
        return PushInt(static_cast<int64_t>(value));
      }
      case kLong1:
        return Long1();
      case kBinFloat: {
        DFLASH_ASSIGN_OR_RETURN(const absl::string_view bytes, Take(8));
        uint64_t bits = 0;
        for (const char byte : bytes)
          bits = (bits << 8) | static_cast<uint8_t>(byte);  // Big-endian.
        return Push(Real(std::bit_cast<double>(bits)));
      }
      case kBinUnicode: {
        DFLASH_ASSIGN_OR_RETURN(const uint64_t length, TakeUnsigned(4));
        DFLASH_ASSIGN_OR_RETURN(const absl::string_view text, Take(length));
        return Push(Text(std::string(text)));
      }
      case kEmptyTuple:
        return Push(Scalar(Kind::kTuple));
      case kEmptyList:
        return Push(Scalar(Kind::kList));
      case kEmptyDict:
        return Push(Scalar(Kind::kDict));
      case kTuple: {
        DFLASH_ASSIGN_OR_RETURN(std::vector<ObjectId> items, PopToMark());
        return Push(Sequence(Kind::kTuple, std::move(items)));
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        std::vector<ObjectId> items(opcode - kTuple1 + 1);
        for (size_t i = items.size(); i > 0; --i) {
          DFLASH_ASSIGN_OR_RETURN(items[i - 1], Pop());
        }
        return Push(Sequence(Kind::kTuple, std::move(items)));
      }
      case kAppend:
      case kAppends:
      case kSetItem:
      case kSetItems:
        return AddItems(opcode);
      case kBinPut:
      case kLongBinPut: {
        DFLASH_ASSIGN_OR_RETURN(const uint64_t index, TakeUnsigned(opcode == kBinPut ? 1 : 4));
        DFLASH_ASSIGN_OR_RETURN(const ObjectId top, Top());
        memo_[index] = top;
        return absl::OkStatus();
      }
      case kBinGet:
      case kLongBinGet: {
        DFLASH_ASSIGN_OR_RETURN(const uint64_t index, TakeUnsigned(opcode == kBinGet ? 1 : 4));
        const auto it = memo_.find(index);
        if (it == memo_.end()) return Error(absl::StrCat("memo index ", index, " was never set"));
        if (stack_.size() >= kMaxObjects) return TooManyObjects();
        stack_.push_back(it->second);
        return absl::OkStatus();
      }
      case kGlobal:
        return Global();
      case kReduce:
        return Reduce();
      case kBuild:
        return Build();
      case kBinPersId:
        return PersistentLoad();
      default:
        return Error(absl::StrCat("opcode 0x", absl::Hex(opcode, absl::kZeroPad2),
                                  " is not one that torch.save's protocol-2 pickles use"));
    }
  }

  absl::StatusOr<absl::string_view> Take(uint64_t count) {
    if (count > data_.size() - position_) {
      return Error(absl::StrCat("needs ", count, " more bytes but the pickle has ",
                                data_.size() - position_, " (truncated?)"));
    }
    const absl::string_view bytes = data_.substr(position_, count);
    position_ += count;
    return bytes;
  }

  // A little-endian unsigned integer of `width` bytes.
  absl::StatusOr<uint64_t> TakeUnsigned(size_t width) {
    DFLASH_ASSIGN_OR_RETURN(const absl::string_view bytes, Take(width));
    uint64_t value = 0;
    for (size_t i = width; i > 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[i - 1]);
    return value;
  }

  absl::StatusOr<absl::string_view> TakeLine() {
    const size_t end = data_.find('\n', position_);
    if (end == absl::string_view::npos) return Error("GLOBAL name is not newline-terminated");
    const absl::string_view line = data_.substr(position_, end - position_);
    position_ = end + 1;
    return line;
  }

  absl::Status TooManyObjects() const {
    return Error(absl::StrCat("the pickle makes more than ", kMaxObjects, " objects"));
  }

  absl::Status Push(Object object) {
    if (objects_.size() >= kMaxObjects || stack_.size() >= kMaxObjects) return TooManyObjects();
    objects_.push_back(std::move(object));
    stack_.push_back(static_cast<ObjectId>(objects_.size() - 1));
    return absl::OkStatus();
  }

  absl::Status PushInt(int64_t value) { return Push(Scalar(Kind::kInt, value)); }

  // The stack below the innermost MARK belongs to an enclosing constructor: reaching it is an
  // underflow, as in Python's unpickler.
  size_t StackFloor() const { return marks_.empty() ? 0 : marks_.back(); }

  absl::StatusOr<ObjectId> Top() const {
    if (stack_.size() <= StackFloor()) return Error("stack underflow");
    return stack_.back();
  }

  absl::StatusOr<ObjectId> Pop() {
    DFLASH_ASSIGN_OR_RETURN(const ObjectId top, Top());
    stack_.pop_back();
    return top;
  }

  absl::StatusOr<std::vector<ObjectId>> PopToMark() {
    if (marks_.empty()) return Error("no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ObjectId> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  absl::Status Long1() {
    DFLASH_ASSIGN_OR_RETURN(const uint64_t width, TakeUnsigned(1));
    if (width > 8) return Error(absl::StrCat("LONG1 integer of ", width, " bytes exceeds 64 bits"));
    DFLASH_ASSIGN_OR_RETURN(uint64_t bits, TakeUnsigned(width));
    // Two's complement of `width` bytes: sign-extend from the top byte.
    if (width > 0 && width < 8 && (bits >> (8 * width - 1)) != 0)
      bits |= ~uint64_t{0} << (8 * width);
    return PushInt(static_cast<int64_t>(bits));
  }

  absl::Status AddItems(uint8_t opcode) {
    std::vector<ObjectId> items;
    if (opcode == kAppends || opcode == kSetItems) {
      DFLASH_ASSIGN_OR_RETURN(items, PopToMark());
    } else {
      items.resize(opcode == kSetItem ? 2 : 1);
      for (size_t i = items.size(); i > 0; --i) {
        DFLASH_ASSIGN_OR_RETURN(items[i - 1], Pop());
      }
    }
    DFLASH_ASSIGN_OR_RETURN(const ObjectId target, Top());
    Object& container = objects_[target];
    const bool to_dict = opcode == kSetItem || opcode == kSetItems;
    const Kind expected = to_dict ? Kind::kDict : Kind::kList;
    if (container.kind != expected) {
      return Error(absl::StrCat(to_dict ? "SETITEM(S)" : "APPEND(S)", " on a ",
                                KindName(container.kind), ", not a ", KindName(expected)));
    }
    if (to_dict && items.size() % 2 != 0) return Error("SETITEMS with a key but no value");
    container.items.insert(container.items.end(), items.begin(), items.end());
    return absl::OkStatus();
  }

  absl::Status Global() {
    DFLASH_ASSIGN_OR_RETURN(const absl::string_view module, TakeLine());
    DFLASH_ASSIGN_OR_RETURN(const absl::string_view name, TakeLine());
    for (const AllowedGlobal& allowed : kAllowedGlobals) {
      if (allowed.module == module && allowed.name == name) {
        return Push(GlobalObject(absl::StrCat(module, ".", name), &allowed));
      }
    }
    constexpr size_t kShown = 200;
    return Error(absl::StrCat(
        "refuses global '", absl::CHexEscape(module.substr(0, kShown)), ".",
        absl::CHexEscape(name.substr(0, kShown)),
        "': a PyTorch state dict needs only collections.OrderedDict, torch._utils rebuild "
        "functions and torch storage types, and nothing in the file is ever executed"));
  }

  // torch.save's persistent id of a storage: ("storage", storage_type, key, location, numel).
  absl::Status PersistentLoad() {
    DFLASH_ASSIGN_OR_RETURN(const ObjectId id, Pop());
    const Object& pid = objects_[id];
    const auto is = [&](size_t i, Kind kind) { return objects_[pid.items[i]].kind == kind; };
    if (pid.kind != Kind::kTuple || pid.items.size() != 5 || !is(0, Kind::kString) ||
        objects_[pid.items[0]].text != "storage" || !is(1, Kind::kGlobal) ||
        !is(2, Kind::kString) || !is(3, Kind::kString) || !is(4, Kind::kInt)) {
      return Error(
          "persistent id is not ('storage', storage_type, key, location, numel) as torch.save "
          "writes it");
    }
    const Object& type = objects_[pid.items[1]];
    if (type.global->callable != Callable::kStorageType) {
      return Error(absl::StrCat("persistent id names ", type.text, ", not a storage type"));
    }
    const std::string& key = objects_[pid.items[2]].text;
    const int64_t numel = objects_[pid.items[4]].integer;
    if (numel < 0) return Error(absl::StrCat("storage '", key, "' has ", numel, " elements"));
    const DType dtype = type.global->dtype;
    const auto [it, inserted] = storage_by_key_.emplace(key, result_.storages.size());
    if (inserted) {
      result_.storages.push_back(PickledStorage{key, dtype, numel});
    } else {
      const PickledStorage& known = result_.storages[it->second];
      if (known.dtype != dtype || known.numel != numel) {
        return Error(absl::StrCat("storage '", key, "' is named as ", numel, " x ",
                                  DTypeName(dtype), " and as ", known.numel, " x ",
                                  DTypeName(known.dtype)));
      }
    }
    return Push(Scalar(Kind::kStorage, static_cast<int64_t>(it->second)));
  }

  absl::Status Reduce() {
    DFLASH_ASSIGN_OR_RETURN(const ObjectId args_id, Pop());
    DFLASH_ASSIGN_OR_RETURN(const ObjectId callable_id, Pop());
    const Object& callable = objects_[callable_id];
    const Object& args = objects_[args_id];
    if (callable.kind != Kind::kGlobal) {
      return Error(absl::StrCat("REDUCE calls a ", KindName(callable.kind), ", not a global"));
    }
    if (args.kind != Kind::kTuple) {
      return Error(absl::StrCat("REDUCE of ", callable.text, " with a ", KindName(args.kind),
                                " of arguments, not a tuple"));
    }
    const std::vector<ObjectId> items = args.items;
    const auto arity_error = [&]() {
      return Error(absl::StrCat(callable.text, " called with ", items.size(), " arguments"));
    };
    switch (callable.global->callable) {
      case Callable::kOrderedDict:
        if (!items.empty()) return arity_error();
        return Push(Scalar(Kind::kDict));
      case Callable::kRebuildTensorV2:
        if (items.size() != 6 && items.size() != 7) return arity_error();
        return RebuildTensor(items);
      case Callable::kRebuildTensor:
        if (items.size() != 4) return arity_error();
        return RebuildTensor(items);
      case Callable::kRebuildParameter:
        if (items.size() != 3) return arity_error();
        if (objects_[items[0]].kind != Kind::kTensor) {
          return Error(absl::StrCat(callable.text, " of a ", KindName(objects_[items[0]].kind),
                                    ", not a tensor"));
        }
        stack_.push_back(items[0]);
        return absl::OkStatus();
      case Callable::kSize:
        if (items.size() != 1 || objects_[items[0]].kind != Kind::kTuple) return arity_error();
        stack_.push_back(items[0]);
        return absl::OkStatus();
      case Callable::kStorageType:
        break;
    }
    return Error(absl::StrCat("REDUCE calls ", callable.text, ", which torch.save never calls"));
  }

  absl::StatusOr<std::vector<int64_t>> Integers(ObjectId id, absl::string_view what) const {
    const Object& tuple = objects_[id];
    if (tuple.kind != Kind::kTuple || tuple.items.size() > kMaxPickledTensorRank) {
      return Error(absl::StrCat("tensor ", what, " is not a tuple of at most ",
                                kMaxPickledTensorRank, " integers"));
    }
    std::vector<int64_t> values;
    for (const ObjectId item : tuple.items) {
      const Object& value = objects_[item];
      if (value.kind != Kind::kInt || value.integer < 0) {
        return Error(absl::StrCat("tensor ", what, " has an entry that is not a non-negative int"));
      }
      values.push_back(value.integer);
    }
    return values;
  }

  // (storage, storage_offset, size, stride, ...): the rest (requires_grad, backward hooks,
  // metadata) does not change the values.
  absl::Status RebuildTensor(const std::vector<ObjectId>& args) {
    const Object& storage = objects_[args[0]];
    const Object& offset = objects_[args[1]];
    if (storage.kind != Kind::kStorage) {
      return Error(absl::StrCat("tensor built on a ", KindName(storage.kind), ", not a storage"));
    }
    if (offset.kind != Kind::kInt || offset.integer < 0) {
      return Error("tensor storage offset is not a non-negative int");
    }
    PickledTensor tensor;
    tensor.storage = static_cast<size_t>(storage.integer);
    tensor.storage_offset = offset.integer;
    DFLASH_ASSIGN_OR_RETURN(tensor.shape, Integers(args[2], "size"));
    DFLASH_ASSIGN_OR_RETURN(tensor.stride, Integers(args[3], "stride"));
    if (tensor.shape.size() != tensor.stride.size()) {
      return Error(absl::StrCat("tensor has ", tensor.shape.size(), " sizes but ",
                                tensor.stride.size(), " strides"));
    }
    const PickledStorage& target = result_.storages[tensor.storage];
    bool empty = false;
    int64_t last = tensor.storage_offset;  // Element index of the view's last element.
    for (size_t i = 0; i < tensor.shape.size(); ++i) {
      if (tensor.shape[i] == 0) empty = true;
      int64_t span = 0;
      if (tensor.shape[i] > 0 &&
          (__builtin_mul_overflow(tensor.shape[i] - 1, tensor.stride[i], &span) ||
           __builtin_add_overflow(last, span, &last))) {
        return Error("tensor view overflows 64-bit element indices");
      }
    }
    if (!empty && last >= target.numel) {
      return Error(absl::StrCat("tensor view reaches element ", last, " of storage '", target.key,
                                "', which has ", target.numel));
    }
    tensors_.push_back(std::move(tensor));
    return Push(Scalar(Kind::kTensor, static_cast<int64_t>(tensors_.size() - 1)));
  }

  // BUILD sets an object's state; torch.save emits it only for the OrderedDict's attributes
  // (the _metadata of a module's state dict), which do not change the tensors.
  absl::Status Build() {
    DFLASH_ASSIGN_OR_RETURN(const ObjectId state, Pop());
    static_cast<void>(state);
    DFLASH_ASSIGN_OR_RETURN(const ObjectId target, Top());
    if (objects_[target].kind != Kind::kDict) {
      return Error(
          absl::StrCat("BUILD on a ", KindName(objects_[target].kind), "; only dicts take state"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<PickledStateDict> Finish(ObjectId root_id) {
    const Object& root = objects_[root_id];
    if (root.kind != Kind::kDict) {
      return Error(absl::StrCat("the pickle holds a ", KindName(root.kind),
                                ", not a state dict (a dict of tensors)"));
    }
    std::set<std::string> names;
    for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
      const Object& key = objects_[root.items[i]];
      const Object& value = objects_[root.items[i + 1]];
      if (key.kind != Kind::kString) {
        return Error(absl::StrCat("state dict key is a ", KindName(key.kind), ", not a str"));
      }
      if (value.kind != Kind::kTensor) {
        return Error(absl::StrCat("state dict entry '", key.text, "' is a ", KindName(value.kind),
                                  ", not a tensor"));
      }
      if (!names.insert(key.text).second) {
        return Error(absl::StrCat("state dict entry '", key.text, "' appears twice"));
      }
      PickledTensor tensor = tensors_[static_cast<size_t>(value.integer)];
      tensor.name = key.text;
      result_.tensors.push_back(std::move(tensor));
    }
    return std::move(result_);
  }

  const absl::string_view data_;
  const absl::string_view source_;
  size_t position_ = 0;
  size_t opcode_offset_ = 0;
  std::deque<Object> objects_;  // A deque: references stay valid while it grows.
  std::vector<ObjectId> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ObjectId> memo_;
  std::vector<PickledTensor> tensors_;
  std::unordered_map<std::string, size_t> storage_by_key_;
  PickledStateDict result_;
};

}  // namespace

absl::StatusOr<PickledStateDict> ReadTorchPickle(absl::string_view pickle,
                                                 absl::string_view source) {
  return Unpickler(pickle, source).Run();
}

}  // namespace dflash
