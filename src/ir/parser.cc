#include "ir/parser.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"

namespace tessel::ir {
namespace {

enum class Tok { kEnd, kIdent, kValueRef, kString, kNumber, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier, value name (without %), string contents, number, punct
  int line = 1, col = 1;
};

class Lexer {
 public:
  Lexer(const std::string& text, const std::string& file) : s_(text), file_(file) {}

  Token next() {
    skip_space_and_comments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (i_ >= s_.size()) return t;
    char c = s_[i_];
    if (c == '%') {
      advance();
      t.kind = Tok::kValueRef;
      if (i_ < s_.size() && s_[i_] == '"') {
        t.text = read_string(t);
      } else {
        t.text = read_while([](char ch) { return std::isalnum((unsigned char)ch) || ch == '_' || ch == '.'; });
        if (t.text.empty()) fail(t, "expected a value name after '%'");
      }
      return t;
    }
    if (c == '"') {
      t.kind = Tok::kString;
      t.text = read_string(t);
      return t;
    }
    if (std::isdigit((unsigned char)c) || c == '-' || c == '+') {
      t.kind = Tok::kNumber;
      t.text = read_while([](char ch) {
        return std::isalnum((unsigned char)ch) || ch == '.' || ch == '-' || ch == '+';
      });
      return t;
    }
    if (std::isalpha((unsigned char)c) || c == '_') {
      t.kind = Tok::kIdent;
      t.text = read_while([](char ch) { return std::isalnum((unsigned char)ch) || ch == '_' || ch == '.'; });
      return t;
    }
    t.kind = Tok::kPunct;
    t.text = std::string(1, c);
    advance();
    return t;
  }

  [[noreturn]] void fail(const Token& t, const std::string& msg) const {
    TESSEL_USER_ERROR() << file_ << ":" << t.line << ":" << t.col << ": " << msg;
  }

 private:
  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }
  void skip_space_and_comments() {
    while (i_ < s_.size()) {
      if (std::isspace((unsigned char)s_[i_])) {
        advance();
      } else if (s_.compare(i_, 2, "//") == 0) {
        while (i_ < s_.size() && s_[i_] != '\n') advance();
      } else {
        break;
      }
    }
  }
  template <typename F>
  std::string read_while(F pred) {
    std::string r;
    while (i_ < s_.size() && pred(s_[i_])) {
      r += s_[i_];
      advance();
    }
    return r;
  }
  std::string read_string(const Token& t) {
    advance();  // opening quote
    std::string r;
    while (true) {
      if (i_ >= s_.size()) fail(t, "unterminated string");
      char c = s_[i_];
      advance();
      if (c == '"') break;
      if (c == '\\') {
        if (i_ >= s_.size()) fail(t, "unterminated string");
        char e = s_[i_];
        advance();
        r += e == 'n' ? '\n' : e;
      } else {
        r += c;
      }
    }
    return r;
  }

  const std::string& s_;
  std::string file_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& file) : lex_(text, file) { tok_ = lex_.next(); }

  Graph parse() {
    expect_ident("graph");
    expect_punct("@");
    g_.name = tok_.kind == Tok::kString ? tok_.text : expect(Tok::kIdent, "graph name").text;
    if (tok_.kind == Tok::kString) take();
    expect_ident("opset");
    g_.opset = parse_int();
    expect_punct("{");
    while (!is_punct("}")) statement();
    expect_punct("}");
    if (tok_.kind != Tok::kEnd) lex_.fail(tok_, "unexpected text after the graph");
    return std::move(g_);
  }

 private:
  // ---- token helpers ----
  Token take() {
    Token t = tok_;
    tok_ = lex_.next();
    return t;
  }
  bool is_punct(const char* p) const { return tok_.kind == Tok::kPunct && tok_.text == p; }
  bool is_ident(const char* w) const { return tok_.kind == Tok::kIdent && tok_.text == w; }
  Token expect(Tok kind, const char* what) {
    if (tok_.kind != kind) lex_.fail(tok_, std::string("expected ") + what + ", found '" + tok_.text + "'");
    return take();
  }
  void expect_punct(const char* p) {
    if (!is_punct(p)) lex_.fail(tok_, std::string("expected '") + p + "', found '" + tok_.text + "'");
    take();
  }
  void expect_ident(const char* w) {
    if (!is_ident(w)) lex_.fail(tok_, std::string("expected '") + w + "', found '" + tok_.text + "'");
    take();
  }
  int64_t parse_int() {
    Token t = expect(Tok::kNumber, "an integer");
    size_t pos = 0;
    int64_t v = 0;
    try {
      v = std::stoll(t.text, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != t.text.size()) lex_.fail(t, "malformed integer '" + t.text + "'");
    return v;
  }
  static bool looks_float(const std::string& s) {
    return s.find_first_of(".eEn") != std::string::npos;
  }
  double number_value(const Token& t) {
    if (t.text == "nan") return NAN;
    if (t.text == "inf") return INFINITY;
    if (t.text == "-inf") return -INFINITY;
    size_t pos = 0;
    double v = 0;
    try {
      v = std::stod(t.text, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != t.text.size()) lex_.fail(t, "malformed number '" + t.text + "'");
    return v;
  }

  TensorType parse_type() {
    Token t = expect(Tok::kIdent, "a type such as f32[1,3]");
    auto dt = dtype_from_name(t.text);
    if (!dt) lex_.fail(t, "unknown dtype '" + t.text + "'");
    TensorType ty{*dt, {}};
    expect_punct("[");
    while (!is_punct("]")) {
      ty.shape.push_back(parse_int());
      if (!is_punct("]")) expect_punct(",");
    }
    expect_punct("]");
    numel(ty.shape, "type at line " + std::to_string(t.line));
    return ty;
  }

  // Elements of a tensor literal: numbers, nan/inf, true/false.
  Tensor parse_tensor_data(const TensorType& ty) {
    Token open = tok_;
    expect_punct("[");
    if (is_punct(".")) lex_.fail(tok_, "elided constant '[...]' cannot be parsed; print without elision");
    Tensor t(ty.dtype, ty.shape);
    int64_t i = 0;
    while (!is_punct("]")) {
      Token e = take();
      if (i >= t.numel()) lex_.fail(e, "too many elements for " + ty.str());
      if (e.kind == Tok::kIdent && (e.text == "true" || e.text == "false")) {
        t.set_i64(i, e.text == "true");
      } else if (e.kind == Tok::kIdent && (e.text == "nan" || e.text == "inf")) {
        t.set_f64(i, number_value(e));
      } else if (e.kind == Tok::kNumber) {
        if (is_float(ty.dtype)) {
          t.set_f64(i, number_value(e));
        } else {
          size_t pos = 0;
          int64_t v = 0;
          try {
            v = std::stoll(e.text, &pos);
          } catch (const std::exception&) {
            pos = 0;
          }
          if (pos != e.text.size()) lex_.fail(e, "expected an integer element, found '" + e.text + "'");
          t.set_i64(i, v);
        }
      } else {
        lex_.fail(e, "expected a tensor element, found '" + e.text + "'");
      }
      ++i;
      if (!is_punct("]")) expect_punct(",");
    }
    expect_punct("]");
    if (i != t.numel())
      lex_.fail(open, std::to_string(i) + " elements given for " + ty.str() + ", expected " +
                          std::to_string(t.numel()));
    return t;
  }

  Attribute parse_attribute() {
    if (tok_.kind == Tok::kString) return take().text;
    if (tok_.kind == Tok::kNumber || is_ident("nan") || is_ident("inf")) {
      Token t = take();
      // Float attributes are float32, as in ONNX.
      if (looks_float(t.text)) return static_cast<double>(static_cast<float>(number_value(t)));
      size_t pos = 0;
      int64_t v = std::stoll(t.text, &pos);
      if (pos != t.text.size()) lex_.fail(t, "malformed number '" + t.text + "'");
      return v;
    }
    if (is_ident("tensor")) {
      take();
      expect_punct("<");
      TensorType ty = parse_type();
      Tensor data = parse_tensor_data(ty);
      expect_punct(">");
      return data;
    }
    if (is_punct("[")) {
      take();
      std::vector<Token> items;
      while (!is_punct("]")) {
        items.push_back(take());
        if (!is_punct("]")) expect_punct(",");
      }
      expect_punct("]");
      if (items.empty()) return std::vector<int64_t>{};
      if (items[0].kind == Tok::kString) {
        std::vector<std::string> r;
        for (const Token& t : items) {
          if (t.kind != Tok::kString) lex_.fail(t, "mixed list: expected a string");
          r.push_back(t.text);
        }
        return r;
      }
      bool any_float = false;
      for (const Token& t : items) {
        if (t.kind != Tok::kNumber && !(t.kind == Tok::kIdent && (t.text == "nan" || t.text == "inf")))
          lex_.fail(t, "expected a number in the list, found '" + t.text + "'");
        any_float |= looks_float(t.text);
      }
      if (any_float) {
        std::vector<double> r;
        for (const Token& t : items) r.push_back(static_cast<float>(number_value(t)));
        return r;
      }
      std::vector<int64_t> r;
      for (const Token& t : items) {
        size_t pos = 0;
        r.push_back(std::stoll(t.text, &pos));
      }
      return r;
    }
    lex_.fail(tok_, "expected an attribute value, found '" + tok_.text + "'");
  }

  ValueId lookup(const Token& t) {
    auto it = names_.find(t.text);
    if (it == names_.end()) lex_.fail(t, "use of undefined value %" + t.text);
    return it->second;
  }
  ValueId define(const Token& t, TensorType ty) {
    if (names_.count(t.text)) lex_.fail(t, "value %" + t.text + " is defined twice");
    ValueId v = g_.add_value(t.text, std::move(ty));
    names_[t.text] = v;
    return v;
  }

  void statement() {
    if (is_ident("input")) {
      take();
      Token name = expect(Tok::kValueRef, "a value name");
      expect_punct(":");
      g_.inputs.push_back(define(name, parse_type()));
      return;
    }
    if (is_ident("const")) {
      take();
      Token name = expect(Tok::kValueRef, "a value name");
      expect_punct(":");
      TensorType ty = parse_type();
      expect_punct("=");
      Tensor data = parse_tensor_data(ty);
      ValueId v = define(name, ty);
      g_.value(v).data = std::make_shared<const Tensor>(std::move(data));
      return;
    }
    if (is_ident("output")) {
      take();
      g_.outputs.push_back(lookup(expect(Tok::kValueRef, "a value name")));
      return;
    }
    // %a, %b = Op(%x, _, %y) {attrs} : types @"name"
    std::vector<Token> outs;
    outs.push_back(expect(Tok::kValueRef, "a statement (input, const, output or %value = Op(...))"));
    while (is_punct(",")) {
      take();
      outs.push_back(expect(Tok::kValueRef, "a value name"));
    }
    expect_punct("=");
    Token op = tok_;
    if (tok_.kind != Tok::kIdent && tok_.kind != Tok::kString) lex_.fail(tok_, "expected an op name");
    take();
    expect_punct("(");
    std::vector<ValueId> ins;
    while (!is_punct(")")) {
      if (tok_.kind == Tok::kIdent && tok_.text == "_") {
        take();
        ins.push_back(kNoValue);
      } else {
        ins.push_back(lookup(expect(Tok::kValueRef, "an operand")));
      }
      if (!is_punct(")")) expect_punct(",");
    }
    expect_punct(")");
    Attributes attrs;
    if (is_punct("{")) {
      take();
      while (!is_punct("}")) {
        Token key = expect(Tok::kIdent, "an attribute name");
        expect_punct("=");
        if (attrs.count(key.text)) lex_.fail(key, "attribute '" + key.text + "' given twice");
        attrs[key.text] = parse_attribute();
        if (!is_punct("}")) expect_punct(",");
      }
      expect_punct("}");
    }
    expect_punct(":");
    std::vector<TensorType> types;
    types.push_back(parse_type());
    while (is_punct(",")) {
      take();
      types.push_back(parse_type());
    }
    if (types.size() != outs.size())
      lex_.fail(op, std::to_string(outs.size()) + " results but " + std::to_string(types.size()) + " types");
    expect_punct("@");
    Token node_name = expect(Tok::kString, "a quoted node name");
    std::vector<ValueId> out_ids;
    for (size_t i = 0; i < outs.size(); ++i) out_ids.push_back(define(outs[i], types[i]));
    g_.add_node(op.text, node_name.text, std::move(ins), std::move(out_ids), std::move(attrs));
  }

  Lexer lex_;
  Token tok_;
  Graph g_;
  std::unordered_map<std::string, ValueId> names_;
};

}  // namespace

Graph parse_graph(const std::string& text, const std::string& filename) {
  return Parser(text, filename).parse();
}

Graph parse_graph_file(const std::string& path) {
  std::ifstream f(path);
  TESSEL_USER_CHECK(f.good()) << path << ": cannot open file";
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_graph(ss.str(), path);
}

}  // namespace tessel::ir
