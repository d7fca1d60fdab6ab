/*! (in progress) */
