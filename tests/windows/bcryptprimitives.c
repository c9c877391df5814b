/* For Wine only, never shipped: Wine 8 has no bcryptprimitives.dll, whose ProcessPrng the
 * Rust standard library imports on Windows. This stand-in answers it with RtlGenRandom
 * (advapi32's SystemFunction036), which Wine has. Built by `cargo xtask windows` beside the
 * .exe in target/; Windows itself has the real DLL. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG part = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, part))
            return FALSE;
        data += part;
        length -= part;
    }
    return TRUE;
}
