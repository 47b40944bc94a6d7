//! Bodies of the fuzz targets in `fuzz/`, kept here so stable tests can run them too.
