// The package's entry in the browser: the engine (torchlet.js) and Model.fromOnnx, which
// loads the ONNX importer (../onnx/, a wasm module of its own) on its first call, so a
// page that trains layers or a model file never downloads it.
import init, { Model } from './torchlet.js';

export * from './torchlet.js';
export default init;

let importer;

function loadImporter() {
  if (!importer) {
    importer = import('../onnx/torchlet_onnx.js').then(async (onnx) => {
      await onnx.default();
      return onnx;
    });
    importer.catch(() => { importer = undefined; }); // a failed download may be retried
  }
  return importer;
}

Model.fromOnnx = async function fromOnnx(bytes, externalData, lr, momentum, arenaBytes, trainable) {
  const onnx = await loadImporter();
  return Model.load(onnx.onnxToModel(bytes, externalData), lr, momentum, arenaBytes, trainable);
};
