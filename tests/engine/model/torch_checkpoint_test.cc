// engine/model/{zip_archive,pickle_reader,torch_checkpoint}: PyTorch zip checkpoints written by
// the test writer (byte for byte as torch.save writes them), and hostile variants of them.
#include "engine/model/torch_checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "engine/model/pickle_reader.h"
#include "engine/model/safetensors.h"
#include "engine/model/zip_archive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/torch_checkpoint_writer.h"

namespace dflash {
namespace {

using test::TorchCheckpointWriter;
using test::ZipRecord;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using std::string_literals::operator""s;

std::vector<float> Iota(size_t count, float start = 0.5f) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = start + 0.25f * static_cast<float>(i);
  return values;
}

// Opens `bytes` as a file: the result maps it, so it views no memory of the caller's.
absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> Parse(const std::string& bytes) {
  test::ScopedTempDir dir;
  const std::filesystem::path path = dir.path() / "pytorch_model.bin";
  if (absl::Status status = test::WriteTextFile(path, bytes); !status.ok()) return status;
  return TorchCheckpointFile::Open(path);  // The mapping outlives the removed directory.
}

// The error of parsing `bytes`, which must be INVALID_ARGUMENT naming the file.
std::string ParseError(const std::string& bytes) {
  absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = Parse(bytes);
  EXPECT_FALSE(file.ok());
  if (file.ok()) return "";
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr("/pytorch_model.bin: "));
  return std::string(file.status().message());
}

std::vector<float> ReadTensor(const TorchCheckpointFile& file, absl::string_view name) {
  for (const TensorInfo& info : file.tensors()) {
    if (info.name != name) continue;
    absl::StatusOr<std::vector<float>> values = file.ReadFloat32(info);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? *values : std::vector<float>{};
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

// An archive whose data.pkl is `pickle` and which has one F32 storage "0" of `numel` elements.
std::string ArchiveWithPickle(const std::string& pickle, int numel = 4) {
  std::vector<ZipRecord> records = TorchCheckpointWriter().Records();
  records[0].content = pickle;
  records.insert(records.begin() + 4, {"pytorch_model/data/0", std::string(4 * numel, '\0')});
  return test::BuildZip(records);
}

// The test writer's data.pkl equals, byte for byte, what Python's pickler writes for the same state
// dict through torch.save's persistent ids (tests/fuzz/make_seed_corpus.py makes those files with
// stand-ins for the torch objects).
TEST(TorchCheckpointTest, WriterPickleMatchesPythonsPickler) {
  for (const auto& [container, file] :
       {std::pair{TorchCheckpointWriter::Container::kOrderedDictWithMetadata,
                  "state_dict_ordered_metadata.pkl"},
        std::pair{TorchCheckpointWriter::Container::kDict, "state_dict_plain_dict.pkl"}}) {
    TorchCheckpointWriter writer;
    writer.SetContainer(container);
    const std::vector<float> floats = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f};
    const size_t f32 = writer.AddStorage(DType::kF32, EncodeFloats(floats, DType::kF32));
    writer.AddView("deberta.embeddings.word_embeddings.weight", f32, 0, {2, 3}, {3, 1});
    writer.AddView("tied.weight", f32, 0, {2, 3}, {3, 1});
    writer.AddView("deberta.embeddings.LayerNorm.bias", f32, 3, {3}, {1});
    const size_t f16 = writer.AddStorage(DType::kF16, "\x00\x3c\x00\xc0"s);
    writer.AddView("classifier.bias", f16, 0, {2}, {1});
    absl::StatusOr<std::string> python = ReadFile(std::filesystem::path(DFLASH_SOURCE_DIR) /
                                                  "tests/fuzz/corpus/torch_pickle_fuzz" / file);
    ASSERT_TRUE(python.ok()) << python.status();
    EXPECT_EQ(writer.Pickle(), *python) << file;

    absl::StatusOr<PickledStateDict> state = ReadTorchPickle(*python, file);
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_EQ(state->storages.size(), 2u);
    EXPECT_EQ(state->storages[0].numel, 6);
    EXPECT_EQ(state->storages[1].dtype, DType::kF16);
    ASSERT_EQ(state->tensors.size(), 4u);
    EXPECT_EQ(state->tensors[1].name, "tied.weight");
    EXPECT_EQ(state->tensors[1].storage, 0u);
    EXPECT_EQ(state->tensors[2].storage_offset, 3);
    EXPECT_EQ(state->tensors[3].storage, 1u);
  }
}

// Archives written by Python's zipfile (no alignment padding, no zip64 records; one deflated)
// around the same pickle read too.
TEST(TorchCheckpointTest, ArchivesFromPythonsZipfileRead) {
  for (const char* name :
       {"pytorch_model.bin", "no_byteorder.bin", "deflated.bin", "torch_layout_zip64.bin"}) {
    const std::filesystem::path path =
        std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/fuzz/corpus/zip_archive_fuzz" / name;
    absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = TorchCheckpointFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_THAT(ReadTensor(**file, "tied.weight"), ElementsAre(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f));
    EXPECT_THAT(ReadTensor(**file, "deberta.embeddings.LayerNorm.bias"),
                ElementsAre(1.5f, 2.0f, 2.5f));
    EXPECT_THAT(ReadTensor(**file, "classifier.bias"), ElementsAre(1.0f, -2.0f));
  }
}

// make_seed_corpus.py lays out torch_layout_zip64.bin independently of BuildZip, from the same
// reading of PyTorch's writer; both must agree byte for byte.
TEST(TorchCheckpointTest, BuildZipMatchesThePythonLayout) {
  const std::filesystem::path corpus =
      std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/fuzz/corpus";
  absl::StatusOr<std::string> pickle =
      ReadFile(corpus / "torch_pickle_fuzz/state_dict_ordered_metadata.pkl");
  absl::StatusOr<std::string> python = ReadFile(corpus / "zip_archive_fuzz/torch_layout_zip64.bin");
  ASSERT_TRUE(pickle.ok()) << pickle.status();
  ASSERT_TRUE(python.ok()) << python.status();
  const std::vector<float> floats = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f};
  const std::vector<ZipRecord> records = {
      {"pytorch_model/data.pkl", *pickle},
      {"pytorch_model/.format_version", "1"},
      {"pytorch_model/.storage_alignment", "64"},
      {"pytorch_model/byteorder", "little"},
      {"pytorch_model/data/0", EncodeFloats(floats, DType::kF32)},
      {"pytorch_model/data/1", "\x00\x3c\x00\xc0"s},
      {"pytorch_model/version", "3\n"},
      {"pytorch_model/.data/serialization_id", std::string(40, '0')},
  };
  EXPECT_EQ(test::BuildZip(records), *python);
}

TEST(TorchCheckpointTest, FloatDTypesReadBitIdenticalToSafetensors) {
  const std::vector<float> values = {1.0f, -2.5f, 3.14159f, 1e-8f, 65504.0f, -0.0f};
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    TorchCheckpointWriter writer;
    writer.AddFloat("w", {2, 3}, values, dtype);
    absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = Parse(writer.Serialize());
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_EQ((*file)->tensors().size(), 1u);
    EXPECT_EQ((*file)->tensors()[0].dtype, dtype);
    EXPECT_THAT((*file)->tensors()[0].shape, ElementsAre(2, 3));

    SafetensorsWriter safetensors;
    safetensors.AddFloat("w", {2, 3}, values, dtype);
    const std::string bytes = safetensors.Serialize();
    absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(bytes, "st");
    ASSERT_TRUE(header.ok());
    std::vector<float> expected(values.size());
    DecodeFloat32(dtype, absl::string_view(bytes).substr(header->data_offset), expected);
    const std::vector<float> actual = ReadTensor(**file, "w");
    ASSERT_EQ(actual.size(), expected.size());
    EXPECT_EQ(std::memcmp(actual.data(), expected.data(), 4 * expected.size()), 0)
        << DTypeName(dtype);
  }
}

TEST(TorchCheckpointTest, PlainDictsAndOrderedDictsWithoutMetadataAlsoRead) {
  for (const auto container :
       {TorchCheckpointWriter::Container::kDict, TorchCheckpointWriter::Container::kOrderedDict}) {
    TorchCheckpointWriter writer;
    writer.SetContainer(container);
    writer.AddFloat("a", {3}, Iota(3));
    writer.AddFloat("b", {}, Iota(1, 7.0f));
    absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = Parse(writer.Serialize());
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_THAT(ReadTensor(**file, "a"), ElementsAreArray(Iota(3)));
    EXPECT_THAT(ReadTensor(**file, "b"), ElementsAre(7.0f));
    EXPECT_TRUE((*file)->tensors()[1].shape.empty());
  }
}

TEST(TorchCheckpointTest, SharedStorageAndOffsetViews) {
  TorchCheckpointWriter writer;
  const std::vector<float> all = Iota(12);
  const size_t storage = writer.AddStorage(DType::kF32, EncodeFloats(all, DType::kF32));
  writer.AddView("whole", storage, 0, {3, 4}, {4, 1});
  writer.AddView("tied", storage, 0, {3, 4}, {4, 1});
  writer.AddView("rows_1_2", storage, 4, {2, 4}, {4, 1});
  writer.AddView("tail", storage, 9, {3}, {1});
  absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = Parse(writer.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(ReadTensor(**file, "whole"), ElementsAreArray(all));
  EXPECT_THAT(ReadTensor(**file, "tied"), ElementsAreArray(all));
  EXPECT_THAT(ReadTensor(**file, "rows_1_2"),
              ElementsAreArray(std::vector<float>(all.begin() + 4, all.begin() + 12)));
  EXPECT_THAT(ReadTensor(**file, "tail"), ElementsAre(all[9], all[10], all[11]));
}

TEST(TorchCheckpointTest, NonContiguousViewsAreCopiedInRowMajorOrder) {
  TorchCheckpointWriter writer;
  const std::vector<float> all = Iota(12);  // A 3 x 4 matrix, row-major.
  const size_t storage = writer.AddStorage(DType::kBF16, EncodeFloats(all, DType::kBF16));
  writer.AddView("transposed", storage, 0, {4, 3}, {1, 4});
  writer.AddView("column_1", storage, 1, {3}, {4});
  writer.AddView("broadcast", storage, 2, {2, 2}, {0, 1});
  absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = Parse(writer.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<float> transposed;
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < 3; ++r) transposed.push_back(all[r * 4 + c]);
  }
  EXPECT_THAT(ReadTensor(**file, "transposed"), ElementsAreArray(transposed));
  EXPECT_THAT(ReadTensor(**file, "column_1"), ElementsAre(all[1], all[5], all[9]));
  EXPECT_THAT(ReadTensor(**file, "broadcast"), ElementsAre(all[2], all[3], all[2], all[3]));
}

TEST(TorchCheckpointTest, DeflatedRecordsAreInflated) {
  TorchCheckpointWriter writer;
  writer.AddFloat("w", {64}, Iota(64));
  std::vector<ZipRecord> records = writer.Records();
  for (ZipRecord& record : records) record.deflate = true;
  absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = Parse(test::BuildZip(records));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(ReadTensor(**file, "w"), ElementsAreArray(Iota(64)));
}

TEST(TorchCheckpointTest, ArchiveRecordsAreStoredAndAligned) {
  TorchCheckpointWriter writer;
  writer.AddFloat("w", {5}, Iota(5));
  const std::string bytes = writer.Serialize();
  absl::StatusOr<std::unique_ptr<ZipArchive>> archive = ZipArchive::Open(bytes, "zip");
  ASSERT_TRUE(archive.ok()) << archive.status();
  std::vector<std::string> names;
  for (const ZipEntry& entry : (*archive)->entries()) names.push_back(entry.name);
  EXPECT_THAT(names, ElementsAre("pytorch_model/data.pkl", "pytorch_model/.format_version",
                                 "pytorch_model/.storage_alignment", "pytorch_model/byteorder",
                                 "pytorch_model/data/0", "pytorch_model/version",
                                 "pytorch_model/.data/serialization_id"));
  const ZipEntry* data = (*archive)->Find("pytorch_model/data/0");
  ASSERT_NE(data, nullptr);
  absl::StatusOr<absl::string_view> content = (*archive)->Read(*data);
  ASSERT_TRUE(content.ok()) << content.status();
  // Stored records are read in place: the view points into the archive's bytes.
  EXPECT_GE(content->data(), bytes.data());
  EXPECT_LT(content->data(), bytes.data() + bytes.size());
  EXPECT_EQ((content->data() - bytes.data()) % 64, 0);
}

TEST(TorchCheckpointTest, RefusesGlobalsOutsideTheAllowList) {
  // pickle.dumps(os.system("ls")) as protocol 2 would call it: GLOBAL, args, REDUCE.
  const std::string pickle =
      std::string("\x80\x02") + "cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01"s + "\x85q\x02Rq\x03.";
  const std::string message = ParseError(ArchiveWithPickle(pickle));
  EXPECT_THAT(message, HasSubstr("refuses global 'os.system'"));
  EXPECT_THAT(message, HasSubstr("data.pkl"));
  EXPECT_THAT(message, HasSubstr("byte 2"));

  const std::string builtins = std::string("\x80\x02") + "c__builtin__\neval\nq\x00."s;
  EXPECT_THAT(ParseError(ArchiveWithPickle(builtins)), HasSubstr("'__builtin__.eval'"));
}

TEST(TorchCheckpointTest, LegacyFormatSaysHowToConvert) {
  // torch.save(..., _use_new_zipfile_serialization=False): a pickled magic number first.
  const std::string legacy = std::string(
      "\x80\x02\x8a\x0al\xfc\x9c"
      "F\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.",
      21);
  const std::string message = ParseError(legacy);
  EXPECT_THAT(message, HasSubstr("legacy serialization format"));
  EXPECT_THAT(message, HasSubstr("torch.save(torch.load(path), path)"));
  EXPECT_THAT(message, HasSubstr("scripts/convert_pytorch_checkpoint.py"));
  EXPECT_THAT(ParseError("not a checkpoint at all"), HasSubstr("is not a PyTorch zip checkpoint"));
}

TEST(TorchCheckpointTest, EveryTruncationIsAnErrorNotACrash) {
  TorchCheckpointWriter writer;
  writer.AddFloat("a", {4, 2}, Iota(8));
  writer.AddFloat("b", {3}, Iota(3), DType::kF16);
  const std::string bytes = writer.Serialize();
  for (size_t length = 0; length < bytes.size(); ++length) {
    absl::StatusOr<std::unique_ptr<TorchCheckpointFile>> file = Parse(bytes.substr(0, length));
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << length;
  }
}

TEST(TorchCheckpointTest, CorruptBytesFailTheirCrc) {
  TorchCheckpointWriter writer;
  writer.AddFloat("w", {16}, Iota(16));
  std::string bytes = writer.Serialize();
  absl::StatusOr<std::unique_ptr<ZipArchive>> archive = ZipArchive::Open(bytes, "zip");
  ASSERT_TRUE(archive.ok());
  absl::StatusOr<absl::string_view> data =
      (*archive)->Read(*(*archive)->Find("pytorch_model/data/0"));
  ASSERT_TRUE(data.ok());
  const size_t offset = static_cast<size_t>(data->data() - bytes.data());
  archive->reset();
  bytes[offset + 5] ^= 0x40;
  EXPECT_THAT(ParseError(bytes), HasSubstr("'pytorch_model/data/0' fails its CRC-32 check"));
}

TEST(TorchCheckpointTest, LayoutErrorsNameTheRecord) {
  TorchCheckpointWriter writer;
  writer.AddFloat("w", {4}, Iota(4));
  auto without = [&](absl::string_view name) {
    std::vector<ZipRecord> records = writer.Records();
    std::erase_if(records, [&](const ZipRecord& record) { return record.name == name; });
    return test::BuildZip(records);
  };
  EXPECT_THAT(ParseError(without("pytorch_model/data/0")),
              HasSubstr("no record 'pytorch_model/data/0' for storage '0'"));
  EXPECT_THAT(ParseError(without("pytorch_model/version")), HasSubstr("'pytorch_model/version'"));
  EXPECT_THAT(ParseError(without("pytorch_model/data.pkl")), HasSubstr("'pytorch_model/data.pkl'"));
  // byteorder is absent in files of PyTorch before 1.13, which are little-endian.
  EXPECT_TRUE(Parse(without("pytorch_model/byteorder")).ok());

  std::vector<ZipRecord> records = writer.Records();
  for (ZipRecord& record : records) {
    if (record.name == "pytorch_model/version") record.name = "pytorch_model/.data/version";
  }
  EXPECT_TRUE(Parse(test::BuildZip(records)).ok()) << "the version record of format 6 and later";
  records = writer.Records();
  records[5].content = "three";
  EXPECT_THAT(ParseError(test::BuildZip(records)), HasSubstr("is not a version number"));

  records = writer.Records();
  records[3].content = "big";
  EXPECT_THAT(ParseError(test::BuildZip(records)), HasSubstr("only little-endian"));
  records = writer.Records();
  records[4].content.pop_back();
  EXPECT_THAT(ParseError(test::BuildZip(records)),
              HasSubstr("record 'pytorch_model/data/0' has 15 bytes, but data.pkl declares 4 "
                        "elements of F32"));
  records = writer.Records();
  records.push_back(records[1]);
  EXPECT_THAT(ParseError(test::BuildZip(records)), HasSubstr("appears twice"));
}

TEST(TorchCheckpointTest, ViewsOutsideTheirStorageAreRefused) {
  TorchCheckpointWriter writer;
  const size_t storage = writer.AddStorage(DType::kF32, std::string(16, '\0'));
  writer.AddView("w", storage, 1, {2, 2}, {2, 1});  // Reaches element 4 of 4.
  EXPECT_THAT(ParseError(writer.Serialize()),
              HasSubstr("tensor view reaches element 4 of storage '0', which has 4"));

  TorchCheckpointWriter overflow;
  const size_t huge = overflow.AddStorage(DType::kF32, std::string(16, '\0'));
  overflow.AddView("w", huge, 0, {3, 2}, {int64_t{1} << 62, 1});
  EXPECT_THAT(ParseError(overflow.Serialize()), HasSubstr("overflows"));
}

TEST(TorchCheckpointTest, HostilePicklesFailWithClearErrors) {
  const std::string proto = "\x80\x02";
  struct Case {
    std::string pickle;
    std::string error;
  };
  const std::vector<Case> cases = {
      {proto, "ends without a STOP opcode"},
      {proto + "X\xff\xff\xff\x7f"
               "abc.",
       "needs 2147483647 more bytes"},
      {proto + "j\xff\xff\xff\xff.", "memo index 4294967295 was never set"},
      {proto + std::string(200000, '(') + ").", "not a state dict"},
      {proto + std::string(200000, ']') + ".", "not a state dict"},
      {proto + "t.", "no MARK"},
      {proto + "(s.", "stack underflow"},
      {proto + "R.", "stack underflow"},
      {proto + "K\x01)R.", "REDUCE calls a int"},
      {proto + "\x8a\x09" + std::string(9, '\x01') + ".", "exceeds 64 bits"},
      {"\x80\x04\x95.", "pickle protocol 4 is not supported"},
      {proto + "I1\n.", "opcode 0x49 is not one"},
      {proto + "ccollections\nOrderedDict\nK\x01\x85R.", "called with 1 arguments"},
      {proto + "}X\x01\x00\x00\x00"s
               "aK\x01s.",
       "entry 'a' is a int, not a tensor"},
      {proto + "K\x01Q.", "persistent id is not"},
      {proto + "]K\x01K\x02s.", "SETITEM(S) on a list"},
      {proto + "ctorch\nFloatStorage\n)R.", "which torch.save never calls"},
      {proto + "K\x01}b.", "BUILD on a int"},
      {proto + "cos\nsystem", "not newline-terminated"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PickledStateDict> state = ReadTorchPickle(c.pickle, "data.pkl");
    ASSERT_FALSE(state.ok()) << c.error;
    EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(state.status().message(), HasSubstr(c.error));
    EXPECT_THAT(state.status().message(), HasSubstr("data.pkl: pickle byte "));
  }
}

TEST(TorchCheckpointTest, RebuildParameterAndTorchSizeAreUnwrapped) {
  // {"p": _rebuild_parameter(_rebuild_tensor(storage, 0, torch.Size((2,)), (1,)), True, {})}
  const std::string pickle =
      "\x80\x02}X\x01\x00\x00\x00"
      "p"
      "ctorch._utils\n_rebuild_parameter\n"
      "ctorch._utils\n_rebuild_tensor\n"
      "((X\x07\x00\x00\x00"
      "storage"
      "ctorch\nFloatStorage\n"
      "X\x01\x00\x00\x00"
      "0"
      "X\x03\x00\x00\x00"
      "cpu"
      "K\x04tQ"
      "K\x00"
      "ctorch\nSize\nK\x02\x85\x85R"
      "K\x01\x85"
      "tR"
      "\x88}\x87R"
      "s."s;
  absl::StatusOr<PickledStateDict> state = ReadTorchPickle(pickle, "data.pkl");
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->tensors.size(), 1u);
  EXPECT_EQ(state->tensors[0].name, "p");
  EXPECT_THAT(state->tensors[0].shape, ElementsAre(2));
  EXPECT_THAT(state->tensors[0].stride, ElementsAre(1));
  ASSERT_EQ(state->storages.size(), 1u);
  EXPECT_EQ(state->storages[0].numel, 4);
}

}  // namespace
}  // namespace dflash
