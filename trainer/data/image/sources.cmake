# Image decoding, smart resize, normalisation and patchify (issue #4).
