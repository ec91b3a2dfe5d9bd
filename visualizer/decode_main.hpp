// flashlab-viz --decode: the decode mode's own flags and window loop (decode_main.cpp). main.cpp hands
// the whole command line over when --decode is among the arguments.
#pragma once

namespace flashlab::viz {

bool wants_decode(int argc, char** argv);  // --decode is among the arguments
int decode_main(int argc, char** argv);    // returns the exit status

}  // namespace flashlab::viz
