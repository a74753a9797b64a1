// The package's entry in node: the engine (torchlet.js) and Model.fromOnnx, which loads
// the ONNX importer (../onnx-node/, a wasm module of its own) on its first call.
const engine = require('./torchlet.js');

engine.Model.fromOnnx = async function fromOnnx(bytes, externalData, lr, momentum, arenaBytes, trainable) {
  const onnx = require('../onnx-node/torchlet_onnx.js');
  return engine.Model.load(onnx.onnxToModel(bytes, externalData), lr, momentum, arenaBytes, trainable);
};

module.exports = engine;
