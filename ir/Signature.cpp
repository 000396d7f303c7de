//===- Signature.cpp - a function's signature attributes -----------------===//
#include "ir/Signature.h"

using namespace mlir;

StringAttr mlir::gpt::argName(func::FuncOp fn, unsigned i) {
  return fn.getArgAttrOfType<StringAttr>(i, kNameAttr);
}

StringAttr mlir::gpt::argKind(func::FuncOp fn, unsigned i) {
  return fn.getArgAttrOfType<StringAttr>(i, kKindAttr);
}

StringAttr mlir::gpt::resultName(func::FuncOp fn, unsigned j) {
  return fn.getResultAttrOfType<StringAttr>(j, kNameAttr);
}

StringAttr mlir::gpt::resultUpdates(func::FuncOp fn, unsigned j) {
  return fn.getResultAttrOfType<StringAttr>(j, kUpdatesAttr);
}

StringAttr mlir::gpt::resultGradOf(func::FuncOp fn, unsigned j) {
  return fn.getResultAttrOfType<StringAttr>(j, kGradOfAttr);
}

DictionaryAttr mlir::gpt::argAttrs(Builder &b, StringRef kind, StringRef name) {
  return b.getDictionaryAttr(
      {b.getNamedAttr(kKindAttr, b.getStringAttr(kind)), b.getNamedAttr(kNameAttr, b.getStringAttr(name))});
}
