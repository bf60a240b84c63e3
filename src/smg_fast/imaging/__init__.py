"""Opening inputs: headers and size limits, the fast decoders, mode conversion, data: URLs."""
