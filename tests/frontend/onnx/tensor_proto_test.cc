// Tensor data in every storage form ONNX has: raw_data, the typed fields, external files.
#include "frontend/onnx/tensor_proto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "frontend/onnx/model_builder.h"

namespace tessel::onnx::testing {
namespace {

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

TensorProto make_tensor(int elem_type, std::vector<int64_t> dims) {
  TensorProto t;
  t.set_name("t");
  t.set_data_type(elem_type);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

Tensor decode(const TensorProto& t, const std::string& base_dir = "") {
  return tensor_from_proto(t, "tensor 't'", base_dir);
}

TEST(OnnxTensor, RawData) {
  TensorProto f = make_tensor(TensorProto::FLOAT, {2, 2});
  f.set_raw_data(raw_bytes<float>({1.5f, -2, 0, 1e30f}));
  EXPECT_EQ(decode(f).type_str(), "f32[2,2]");
  EXPECT_EQ(decode(f).to_f32_vector(), (std::vector<float>{1.5f, -2, 0, 1e30f}));

  TensorProto i = make_tensor(TensorProto::INT64, {3});
  i.set_raw_data(raw_bytes<int64_t>({-1, 1LL << 50, 7}));
  EXPECT_EQ(decode(i).to_i64_vector(), (std::vector<int64_t>{-1, 1LL << 50, 7}));

  TensorProto h = make_tensor(TensorProto::FLOAT16, {2});
  h.set_raw_data(raw_bytes<uint16_t>({0x3c00, 0xc000}));  // 1.0, -2.0
  EXPECT_EQ(decode(h).to_f32_vector(), (std::vector<float>{1.0f, -2.0f}));

  // A bool byte other than 0/1 is true, stored as a proper bool.
  TensorProto b = make_tensor(TensorProto::BOOL, {3});
  b.set_raw_data(std::string("\x00\x01\x07", 3));
  Tensor bt = decode(b);
  EXPECT_EQ(bt.to_i64_vector(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(bt.data<bool>()[2], true);

  TensorProto s = make_tensor(TensorProto::FLOAT, {});  // a scalar
  s.set_raw_data(raw_bytes<float>({3.0f}));
  EXPECT_EQ(decode(s).type_str(), "f32[]");
  TensorProto e = make_tensor(TensorProto::FLOAT, {0, 5});  // empty: no data needed
  EXPECT_EQ(decode(e).numel(), 0);
}

TEST(OnnxTensor, TypedFields) {
  TensorProto f = make_tensor(TensorProto::FLOAT, {2});
  f.add_float_data(0.5f);
  f.add_float_data(-1.0f);
  EXPECT_EQ(decode(f).to_f32_vector(), (std::vector<float>{0.5f, -1.0f}));

  TensorProto d = make_tensor(TensorProto::DOUBLE, {1});
  d.add_double_data(0.1);
  EXPECT_EQ(decode(d).get_f64(0), 0.1);

  TensorProto l = make_tensor(TensorProto::INT64, {2});
  l.add_int64_data(-5);
  l.add_int64_data(1LL << 40);
  EXPECT_EQ(decode(l).to_i64_vector(), (std::vector<int64_t>{-5, 1LL << 40}));

  // int32_data carries every type of 32 bits or fewer.
  TensorProto i32 = make_tensor(TensorProto::INT32, {2});
  i32.add_int32_data(-100000);
  i32.add_int32_data(7);
  EXPECT_EQ(decode(i32).type_str(), "i32[2]");
  EXPECT_EQ(decode(i32).to_i64_vector(), (std::vector<int64_t>{-100000, 7}));

  TensorProto i8 = make_tensor(TensorProto::INT8, {2});
  i8.add_int32_data(-128);
  i8.add_int32_data(127);
  EXPECT_EQ(decode(i8).type_str(), "i8[2]");
  EXPECT_EQ(decode(i8).to_i64_vector(), (std::vector<int64_t>{-128, 127}));

  TensorProto u8 = make_tensor(TensorProto::UINT8, {2});
  u8.add_int32_data(0);
  u8.add_int32_data(255);
  EXPECT_EQ(decode(u8).type_str(), "u8[2]");
  EXPECT_EQ(decode(u8).to_i64_vector(), (std::vector<int64_t>{0, 255}));

  TensorProto b = make_tensor(TensorProto::BOOL, {2});
  b.add_int32_data(1);
  b.add_int32_data(0);
  EXPECT_EQ(decode(b).to_i64_vector(), (std::vector<int64_t>{1, 0}));

  // f16 and bf16: the bit patterns in the low 16 bits.
  TensorProto h = make_tensor(TensorProto::FLOAT16, {2});
  h.add_int32_data(0x3800);  // 0.5
  h.add_int32_data(0x7c00);  // +inf
  Tensor ht = decode(h);
  EXPECT_EQ(ht.type_str(), "f16[2]");
  EXPECT_EQ(ht.data_u16()[0], 0x3800);
  EXPECT_EQ(ht.get_f64(0), 0.5);
  EXPECT_TRUE(std::isinf(ht.get_f64(1)));

  TensorProto bf = make_tensor(TensorProto::BFLOAT16, {1});
  bf.add_int32_data(0xc040);  // -3.0
  EXPECT_EQ(decode(bf).type_str(), "bf16[1]");
  EXPECT_EQ(decode(bf).get_f64(0), -3.0);
}

TEST(OnnxTensor, ExternalData) {
  ScratchDir dir;
  std::string blob = "HEADER" + raw_bytes<float>({1, 2, 3, 4, 5, 6});
  dir.write("weights/w.bin", blob);
  TensorProto t = make_tensor(TensorProto::FLOAT, {2, 2});
  t.set_data_location(TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "weights/w.bin");
  add("offset", std::to_string(6 + 4));  // skip the header and the first float
  add("length", "16");
  add("checksum", "ignored");
  EXPECT_EQ(decode(t, dir.path().string()).to_f32_vector(), (std::vector<float>{2, 3, 4, 5}));

  // Without a length, the data runs to the end of the file.
  TensorProto whole = make_tensor(TensorProto::FLOAT, {2});
  whole.set_data_location(TensorProto::EXTERNAL);
  auto* loc = whole.add_external_data();
  loc->set_key("location");
  loc->set_value("./weights/../weights/w.bin");  // normalises to a path inside the folder
  auto* off = whole.add_external_data();
  off->set_key("offset");
  off->set_value(std::to_string(6 + 16));
  EXPECT_EQ(decode(whole, dir.path().string()).to_f32_vector(), (std::vector<float>{5, 6}));
}

TEST(OnnxTensor, ExternalDataInAModel) {
  ScratchDir dir;
  dir.write("x.bin", raw_bytes<float>({10, 20}));
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  TensorProto* w = m.initializer("w", TensorProto::FLOAT, {2});
  w->set_data_location(TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("x.bin");
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  std::string path = dir.write("model.onnx", m.bytes());
  ir::Graph g = import_model(path, test_options());
  EXPECT_EQ(g.value(g.find_value("w")).data->to_f32_vector(), (std::vector<float>{10, 20}));
}

// External data errors: each names the tensor and the file or location.
class OnnxExternalDataErrors : public ::testing::Test {
 protected:
  OnnxExternalDataErrors() { dir_.write("w.bin", std::string(8, '\0')); }

  std::string error_for(const std::vector<std::pair<std::string, std::string>>& entries,
                        bool with_folder = true) {
    TensorProto t = make_tensor(TensorProto::FLOAT, {2});
    t.set_data_location(TensorProto::EXTERNAL);
    for (const auto& [k, v] : entries) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    std::string msg =
        user_error_of([&] { decode(t, with_folder ? dir_.path().string() : std::string()); });
    EXPECT_EQ(msg.rfind("tensor 't': ", 0), 0u) << msg;
    return msg;
  }

  ScratchDir dir_;
};

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

TEST_F(OnnxExternalDataErrors, AbsolutePath) {
  EXPECT_HAS(error_for({{"location", "/etc/passwd"}}), "'/etc/passwd' is an absolute path");
}

TEST_F(OnnxExternalDataErrors, EscapingTheFolder) {
  EXPECT_HAS(error_for({{"location", "../secret.bin"}}),
             "'../secret.bin' leaves the model's folder");
  EXPECT_HAS(error_for({{"location", "a/../../secret.bin"}}), "leaves the model's folder");
}

TEST_F(OnnxExternalDataErrors, MissingFile) {
  EXPECT_HAS(error_for({{"location", "absent.bin"}}),
             "absent.bin' does not exist or is not a file");
  EXPECT_HAS(error_for({{"offset", "0"}}), "external data has no 'location'");
}

TEST_F(OnnxExternalDataErrors, ShortFile) {
  EXPECT_HAS(error_for({{"location", "w.bin"}, {"offset", "4"}, {"length", "8"}}),
             "is too short: offset 4 + length 8 > 8 bytes");
  EXPECT_HAS(error_for({{"location", "w.bin"}, {"offset", "9"}}), "offset 9 is past the end");
  EXPECT_HAS(error_for({{"location", "w.bin"}, {"length", "4"}}),
             "has 4 bytes, but the tensor's dims need 8");
}

TEST_F(OnnxExternalDataErrors, MalformedNumbers) {
  EXPECT_HAS(error_for({{"location", "w.bin"}, {"offset", "-1"}}),
             "external data 'offset' is '-1', expected a non-negative integer");
  EXPECT_HAS(error_for({{"location", "w.bin"}, {"length", "8x"}}),
             "external data 'length' is '8x'");
}

TEST_F(OnnxExternalDataErrors, ModelGivenAsBytesHasNoFolder) {
  EXPECT_HAS(error_for({{"location", "w.bin"}}, /*with_folder=*/false),
             "without a folder to resolve it in");
}

TEST(OnnxTensor, ReadTensorProtoFile) {
  ScratchDir dir;
  TensorProto t = make_tensor(TensorProto::INT32, {3});
  t.set_raw_data(raw_bytes<int32_t>({4, -5, 6}));
  std::string path = dir.write("input_0.pb", t.SerializeAsString());
  Tensor r = read_tensor_proto(path);
  EXPECT_EQ(r.type_str(), "i32[3]");
  EXPECT_EQ(r.to_i64_vector(), (std::vector<int64_t>{4, -5, 6}));

  std::string bad = dir.write("bad.pb", std::string(8, '\xff'));
  std::string msg = user_error_of([&] { read_tensor_proto(bad); });
  EXPECT_EQ(msg.rfind(bad + ": not a serialized onnx TensorProto", 0), 0u) << msg;
  std::string missing = (dir.path() / "none.pb").string();
  EXPECT_EQ(user_error_of([&] { read_tensor_proto(missing); }), missing + ": cannot open file");
  TensorProto s = make_tensor(TensorProto::STRING, {1});
  s.add_string_data("x");
  std::string str_path = dir.write("str.pb", s.SerializeAsString());
  EXPECT_HAS(user_error_of([&] { read_tensor_proto(str_path); }),
             str_path + ": tensor 't': element type STRING is not supported");
}

TEST(OnnxTensor, ReadsOnnxTestData) {
  // Known values of ONNX's own test data: test_relu's input 0 starts with 1.7640524 (numpy
  // seed 0's first normal sample), and its output is max(x, 0).
  const std::string dir = "/usr/share/libonnx-testdata/data/node/test_relu/test_data_set_0/";
  if (!fs::exists(dir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  Tensor x = read_tensor_proto(dir + "input_0.pb");
  Tensor y = read_tensor_proto(dir + "output_0.pb");
  EXPECT_EQ(x.type_str(), "f32[3,4,5]");
  EXPECT_FLOAT_EQ(x.data<float>()[0], 1.7640524f);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_EQ(y.data<float>()[i], std::max(x.data<float>()[i], 0.0f));
}

}  // namespace
}  // namespace tessel::onnx::testing
