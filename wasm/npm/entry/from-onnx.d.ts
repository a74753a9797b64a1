declare module './torchlet.js' {
  namespace Model {
    /**
     * A model from an ONNX file as PyTorch's `torch.onnx.export` writes it (either
     * exporter). The first call loads the ONNX importer, a wasm module of its own.
     * `externalData` holds the files its external initializers are stored in, by name
     * (`{ "model.onnx.data": bytes, ... }` or a `Map`); a single `Uint8Array` is the one
     * file of a model that has one; `undefined` when every initializer is inline. Then
     * as `Model.load`.
     */
    function fromOnnx(
      bytes: Uint8Array,
      externalData: Uint8Array | Record<string, Uint8Array> | Map<string, Uint8Array> | null | undefined,
      lr: number,
      momentum: number,
      arenaBytes: number,
      trainable?: string[] | null,
    ): Promise<Model>;
  }
}
